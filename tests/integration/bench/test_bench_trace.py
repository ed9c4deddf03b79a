"""`bench --trace` against the fake server (its own process): each format end to end,
requests sent at the trace's instants (bursts too) with the trace's lengths, one
schedule across --workers, conversations, the prefix-cache verdict, and every bad
input refused with one line before anything is sent."""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from infersight.bench import BenchConfig, run
from infersight.diagnose import diagnose
from infersight_testkit import FakeConfig, FakeOpenAI

pytestmark = pytest.mark.timeout(120)

CLI = [sys.executable, "-c", "from infersight.cli import main; main()"]


@pytest.fixture(scope="module")
def fake() -> Iterator[Any]:
    with FakeOpenAI.subprocess(FakeConfig(ttft=0.005, itl=0.001, tokens=50)) as srv:
        yield srv


def _cfg(url: str, trace: Path, **kw: Any) -> BenchConfig:
    return BenchConfig.build(
        url=url, trace=str(trace), progress=False, diagnose=False, ignore_eos=True, **kw
    )


def _bursty(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    """Bursts of 10 requests within 9 ms, 150 ms apart; half share a 64-token block."""
    rows = []
    for b in range(4):
        for i in range(10):
            rows.append(
                {
                    "timestamp": b * 150 + i,
                    "input_length": 64 + 8 * i,
                    "output_length": 2 + i % 5,
                    "hash_ids": [7] if i % 2 else [100 + 10 * b + i],
                }
            )
    p = tmp_path / "bursty.jsonl"
    p.write_text("".join(orjson.dumps(r).decode() + "\n" for r in rows))
    return p, rows


def _offsets(result: Any) -> list[float]:
    recs = sorted(result.records, key=lambda r: int(r.labels["line"]))
    return [r.scheduled - recs[0].scheduled for r in recs]


def test_requests_go_at_the_trace_s_instants_with_its_lengths(fake: Any, tmp_path: Path) -> None:
    path, rows = _bursty(tmp_path)
    result = run(_cfg(fake.base_url, path, speedup=[2.0], block_size=64))
    assert [lv["name"] for lv in result.config["levels"]] == ["trace x2"]
    recs = sorted(result.records, key=lambda r: int(r.labels["line"]))
    assert len(recs) == 40 and all(r.ok for r in recs)
    want = [r["timestamp"] / 1000 / 2 for r in rows]
    assert _offsets(result) == pytest.approx(want, abs=1e-9)  # the schedule is the trace's
    # the fake counts words: exact prompt lengths; ignore_eos: exact answer lengths
    assert [r.prompt_tokens for r in recs] == [r["input_length"] for r in rows]
    assert [r.completion_tokens for r in recs] == [r["output_length"] for r in rows]
    agg = result.aggregates["trace x2"]
    fid = agg["replay"]
    assert fid["prompt_tokens_error"]["exact"] == 40 and fid["output_tokens_error"]["short"] == 0
    assert fid["send_lag"]["count"] == 40
    ps = agg["prefix_sharing"]
    # 20 requests begin with block 7; all but the first repeat its 64 tokens
    assert ps["intended"] == pytest.approx(19 * 64 / sum(r["input_length"] for r in rows))
    assert abs(ps["sent"] - ps["intended"]) < 0.05
    w = result.config["workload"]
    assert (w["format"], w["requests"], w["lengths_exact"]) == ("mooncake", 40, True)


def test_every_format_end_to_end(fake: Any, tmp_path: Path) -> None:
    files = {
        "csv": "timestamp,input_tokens,output_tokens\n0,12,3\n0.05,20,4\n0.1,8,2\n",
        "burstgpt": (
            "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
            "5,ChatGPT,12,3,15,Conversation log\n5.02,GPT-4,30,0,30,API log\n"
            "5.05,GPT-4,20,4,24,API log\n"
        ),
        "gateway": "".join(
            orjson.dumps(d).decode() + "\n"
            for d in [
                {
                    "v": 1,
                    "ts": 10.2,
                    "arrival_ts": 10.0,
                    "request_id": "a",
                    "endpoint": "chat",
                    "status": 200,
                    "latency_ms": 200.0,
                    "prompt_tokens": 40,
                    "completion_tokens": 3,
                    "prefix": [["system", "abc", 100], ["user", "def", 20]],
                },
                {
                    "v": 1,
                    "ts": 10.15,
                    "arrival_ts": 10.1,
                    "request_id": "b",
                    "endpoint": "chat",
                    "status": 200,
                    "latency_ms": 50.0,
                    "prompt_tokens": 50,
                    "completion_tokens": 2,
                    "prefix": [["system", "abc", 100], ["user", "012", 40]],
                },
            ]
        ),
    }
    for fmt, text in files.items():
        p = tmp_path / f"t-{fmt}.txt"
        p.write_text(text)
        result = run(_cfg(fake.base_url, p))
        recs = sorted(result.records, key=lambda r: r.scheduled)
        assert result.config["workload"]["format"] == fmt
        assert all(r.ok for r in recs) and len(recs) == (2 if fmt != "csv" else 3)
        assert [r.prompt_tokens for r in recs] == [int(r.labels["in"]) for r in recs]
    # the access log's system prompt is the same text in both requests (the fake counts
    # words: 40 and 50 tokens split 100:20 and 100:40 give the same system message)
    assert result.aggregates["trace x1"]["prefix_sharing"]["sent"] > 0.3


def test_workers_split_one_schedule(fake: Any, tmp_path: Path) -> None:
    path, rows = _bursty(tmp_path)
    result = run(_cfg(fake.base_url, path, workers=2))
    assert _offsets(result) == pytest.approx([r["timestamp"] / 1000 for r in rows], abs=1e-9)
    by_worker = {r.labels["line"]: r.labels["worker"] for r in result.records}
    assert sorted(by_worker.values()) == ["0"] * 20 + ["1"] * 20  # request i on worker i % 2
    assert all(by_worker[str(i + 1)] == str(i % 2) for i in range(40))


def test_conversations_carry_the_answers_and_report_ttft_per_turn(fake: Any) -> None:
    cfg = BenchConfig.build(
        url=fake.base_url,
        sessions=3,
        concurrency=[2],
        turns="fixed:3",
        think_time="20ms",
        input_tokens="fixed:10",
        max_tokens=6,
        ignore_eos=True,
        shared_prefix=5,
        progress=False,
        diagnose=False,
    )
    result = run(cfg)
    recs = result.records
    assert len(recs) == 9 and all(r.ok for r in recs)
    convs: dict[str, list[Any]] = {}
    for r in recs:
        convs.setdefault(r.labels["session"], []).append(r)
    for turns in convs.values():
        turns.sort(key=lambda r: int(r.labels["turn"]))
        # turn k+1 = turn k's prompt + the answer received + the new message
        for a, b in itertools.pairwise(turns):
            assert b.prompt_tokens == a.prompt_tokens + a.completion_tokens + 10
            assert b.scheduled >= a.end + 0.02 - 1e-6  # the think time, after the answer
    agg = result.aggregates["c=2"]
    assert list(agg["replay"]["turns"]) == ["1", "2", "3"]
    assert agg["replay"]["turns"]["3"]["prompt_tokens_mean"] == 15 + 2 * 16
    assert agg["prefix_sharing"]["sent"] == pytest.approx(agg["prefix_sharing"]["intended"])


def test_a_shared_prefix_workload_on_a_cold_cache_gets_the_verdict(tmp_path: Path) -> None:
    """The fake's vLLM metrics count prompt tokens looked up and no hit."""
    rows = [
        {"timestamp": i * 20, "input_length": 80, "output_length": 2, "hash_ids": [1, 2000 + i]}
        for i in range(30)
    ]
    path = tmp_path / "shared.jsonl"
    path.write_text("".join(orjson.dumps(r).decode() + "\n" for r in rows))
    with FakeOpenAI.subprocess(
        FakeConfig(ttft=0.005, itl=0.001, tokens=5, metrics_dialect="vllm")
    ) as srv:
        result = run(
            BenchConfig.build(
                url=srv.base_url,
                trace=str(path),
                block_size=64,
                sample_interval=0.2,
                progress=False,
                diagnose=False,
            )
        )
    agg = result.aggregates["trace x1"]
    assert agg["prefix_sharing"]["sent"] > 0.7
    assert agg["prefix_cache"]["engine"]["hit_rate"] == 0.0
    v = next(v for v in diagnose(result) if v.id == "prefix_cache_miss")
    assert "vLLM's automatic prefix cache served 0%" in v.summary
    assert any("--enable-prefix-caching" in f for f in v.fixes)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "bench", "--no-progress", *args], capture_output=True, text=True, timeout=90
    )


def test_bad_traces_are_one_line_and_nothing_is_sent(tmp_path: Path) -> None:
    with FakeOpenAI.subprocess(FakeConfig(tokens=2)) as srv:
        bad = tmp_path / "bad.jsonl"
        bad.write_text(
            '{"timestamp": 0, "input_length": 5, "output_length": 2}\n'
            '{"timestamp": -3, "input_length": 5, "output_length": 2}\n'
        )
        empty = tmp_path / "empty.jsonl"
        empty.write_text("")
        cases = [
            (["--trace", str(bad)], "line 2: timestamp is negative (-3)"),
            (["--trace", str(empty)], "the file is empty: no request to replay"),
            (
                ["--trace", str(bad), "--on-bad-line", "skip", "--window", "5s-"],
                "--window 5s-: selects no request",
            ),
            (["--trace", str(tmp_path / "nope.jsonl")], "cannot read (no such file)"),
        ]
        for args, want in cases:
            r = _cli("--url", srv.base_url, *args)
            assert r.returncode == 2, (args, r.stderr)
            lines = r.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: ") and want in lines[0], lines
            assert "Traceback" not in r.stderr
        assert srv.stats()["requests"] == 0  # not even the test request went out
        r = _cli(
            "--url", srv.base_url, "--trace", str(bad), "--on-bad-line", "skip", "--no-diagnose"
        )
        assert r.returncode == 0, r.stderr
        assert "trace: 1 unusable line(s) skipped (--on-bad-line skip), e.g. line 2:" in r.stdout
        assert "trace x1 replay: send lag against the trace" in r.stdout
