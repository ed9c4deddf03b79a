"""The loop record -> replay through a real `infersight gateway` (its own process, over
the fake server): traffic sent through the gateway, its access log replayed through a
second gateway, and the second log matching the first request for request."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest

from infersight.bench import BenchConfig, run
from infersight.core.access_log_format import ACCESS_LOG_VERSION
from infersight_testkit import FakeConfig, FakeOpenAI
from infersight_testkit.cli_process import interrupt, start_cli

pytestmark = pytest.mark.timeout(180)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _through_gateway(upstream: str, log: Path, cfg: dict[str, Any]) -> Any:
    with log.open("w") as out:
        proc, _, url = start_cli(
            "--upstream", f"fake={upstream},models=fake,concurrency=32", "--port", "0", stdout=out
        )  # type: ignore[arg-type]
        try:
            return run(
                BenchConfig.build(
                    url=url, model="fake", ignore_eos=True, progress=False, diagnose=False, **cfg
                )
            )
        finally:
            assert interrupt(proc, 20) == 0  # the buffered lines are written on the way out


def test_access_log_round_trip(tmp_path: Path) -> None:
    log1, log2 = tmp_path / "original.jsonl", tmp_path / "replayed.jsonl"
    with FakeOpenAI.subprocess(FakeConfig(ttft=0.003, itl=0.001, tokens=64)) as fake:
        _through_gateway(
            fake.base_url,
            log1,
            {
                "rate": [25.0],
                "arrival": "poisson",
                "requests": 30,
                "input_tokens": "lognormal:60:30",
                "output_tokens": "uniform:2:12",
                "shared_prefix": 20,
                "seed": 3,
            },
        )
        conv = tmp_path / "conversations.jsonl"
        _through_gateway(
            fake.base_url,
            conv,
            {
                "sessions": 3,
                "concurrency": [3],
                "turns": "fixed:3",
                "input_tokens": "fixed:8",
                "max_tokens": 4,
            },
        )
        with log1.open("a") as f:  # one day's log: both runs
            f.write(conv.read_text())
        original = _lines(log1)
        result = _through_gateway(fake.base_url, log2, {"trace": str(log1)})
    # The log is the documented format, with what replay needs and no key.
    assert {ln["v"] for ln in original} == {ACCESS_LOG_VERSION}
    assert all(ln["arrival_ts"] <= ln["ts"] and ln["prefix"] for ln in original)
    sessions = Counter(ln["session"] for ln in original if "session" in ln)
    assert sorted(sessions.values()) == [3, 3, 3]
    assert all(s.startswith("s-") for s in sessions)  # hashed, never the id sent
    # Replayed at the original's instants: the schedule is the log's arrivals.
    recs = sorted(result.records, key=lambda r: r.scheduled)
    assert len(recs) == len(original) and all(r.ok for r in recs)
    first = [ln for ln in original if "session" not in ln]
    firsts = sorted(ln["arrival_ts"] for ln in first)
    plain = sorted(r.scheduled for r in recs if "session" not in r.labels)
    assert [t - plain[0] for t in plain] == pytest.approx([t - firsts[0] for t in firsts], abs=1e-6)
    assert result.config["workload"]["sessions"] == 3
    # The second log holds the same requests: lengths request for request.
    replayed = sorted(_lines(log2), key=lambda ln: ln["arrival_ts"])[-len(original) :]

    def lengths(lines: list[dict[str, Any]]) -> list[tuple[int, int]]:
        return sorted((ln["prompt_tokens"], ln["completion_tokens"]) for ln in lines)

    assert lengths(replayed) == lengths(original)
    # A conversation's later turns grew by the answers the replay received.
    turns = sorted(
        (r for r in recs if r.labels.get("turn")),
        key=lambda r: (r.labels["session"], int(r.labels["turn"])),
    )
    assert [r.labels["turn"] for r in turns] == ["1", "2", "3"] * 3
    agg = result.aggregates["trace x1"]
    assert agg["replay"]["prompt_tokens_error"]["exact"] == len(original)
    assert list(agg["replay"]["turns"]) == ["1", "2", "3"]
