"""``vllm bench serve`` results, read by infersight. vLLM (a GPU serving engine) is not
run here: its file is built from the fields ``vllm bench serve --save-result
--save-detailed --append-result`` documents and writes (vllm/benchmarks/serve.py: one
JSON object per run and line; ``start_times`` when each request was sent, ``ttfts``,
``itls`` (each gap between chunks), ``latencies``, ``queue_times``, ``input_lens``,
``output_lens``, ``errors``, and the ``mean_/median_/std_/p99_`` statistics in ms),
filled with the requests infersight's own bench measured of the fake server. Read
back, they must give the same verdict and fix as infersight's own run of them; without
the per-request arrays the verdict says what is missing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from infersight.bench import BenchConfig
from infersight.cli._app import app
from infersight.core.records import RequestRecord, RunResult
from infersight.diagnose import diagnose_run
from infersight.entrypoints.bench import bench_and_diagnose
from infersight.importers import detect, import_file
from infersight.testing.agreement import advice, disagreements
from infersight.testing.fake_openai import FakeConfig, FakeOpenAI

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

LEVELS = [1, 4, 8]


def _ms(values: list[float], name: str) -> dict[str, float]:
    a = np.asarray(values) * 1000
    return {
        f"mean_{name}_ms": float(a.mean()),
        f"median_{name}_ms": float(np.median(a)),
        f"std_{name}_ms": float(a.std()),
        f"p99_{name}_ms": float(np.percentile(a, 99)),
    }


def vllm_run(records: list[RequestRecord], conc: int, detailed: bool) -> dict[str, Any]:
    """One ``--save-result`` object of the requests of one level (vLLM's own keys)."""
    ok = [r for r in records if r.ok]
    assert ok and all(r.sent is not None and r.end is not None for r in ok)
    first = min(r.sent or 0.0 for r in records)
    duration = max(r.end or 0.0 for r in ok) - first
    ttfts = [r.chunk_times[0] - (r.sent or 0.0) for r in ok]
    itls = [list(np.diff(r.chunk_times)) for r in ok]
    lat = [(r.end or 0.0) - (r.sent or 0.0) for r in ok]
    out = [r.output_tokens for r in ok]
    tpot = [(lt - tt) / (n - 1) for lt, tt, n in zip(lat, ttfts, out, strict=True)]
    doc: dict[str, Any] = {
        "date": "20261204-050000",
        "endpoint_type": "openai",
        "backend": "openai",
        "label": None,
        "model_id": "fake",
        "tokenizer_id": "fake",
        "num_prompts": len(records),
        "request_rate": "inf",
        "burstiness": 1.0,
        "max_concurrency": conc,
        "duration": duration,
        "completed": len(ok),
        "failed": len(records) - len(ok),
        "total_input_tokens": sum(r.prompt_tokens or 0 for r in ok),
        "total_output_tokens": sum(out),
        "request_throughput": len(ok) / duration,
        "request_goodput": None,
        "output_throughput": sum(out) / duration,
        "total_token_throughput": sum(out) / duration,
        **_ms(ttfts, "ttft"),
        **_ms(tpot, "tpot"),
        **_ms([g for x in itls for g in x], "itl"),
        **_ms(lat, "e2el"),
    }
    if detailed:
        doc.update(
            {
                "input_lens": [r.prompt_tokens for r in ok],
                "output_lens": out,
                "ttfts": ttfts,
                "itls": itls,
                "latencies": lat,
                "start_times": [r.sent for r in ok],
                "queue_times": [(r.sent or 0.0) - r.scheduled for r in ok],
                "generated_texts": ["tok " * n for n in out],
                "errors": [""] * len(ok),
            }
        )
    return doc


@pytest.fixture(scope="module")
def ours() -> RunResult:
    cfg = FakeConfig(ttft=0.05, itl=0.01, tokens=16, slots=4, metrics_dialect="vllm")
    with FakeOpenAI.subprocess(cfg) as srv:
        return bench_and_diagnose(
            BenchConfig(
                url=srv.base_url,
                concurrency=LEVELS,
                requests=24,
                max_tokens=16,
                input_tokens="fixed:16",
                progress=False,
                diagnose=True,
            )
        )


def _write(ours: RunResult, path: Path, detailed: bool) -> Path:
    lines = [
        json.dumps(
            vllm_run([r for r in ours.records if r.labels["level"] == f"c={c}"], c, detailed)
        )
        for c in LEVELS
    ]
    path.write_text("\n".join(lines) + "\n")  # --append-result: one run a line
    return path


def test_vllm_detailed_results_get_our_verdict_and_fix(ours: RunResult, tmp_path: Path) -> None:
    path = _write(ours, tmp_path / "openai-infqps-concurrency8-fake.json", detailed=True)
    assert detect(path.read_bytes()) == "vllm"
    run = import_file(path)
    assert [lv["name"] for lv in run.config["levels"]] == ["c=1", "c=4", "c=8"]
    for c in LEVELS:
        assert run.aggregates[f"c={c}"]["tpot"]["p50"] == pytest.approx(
            ours.aggregates[f"c={c}"]["tpot"]["p50"], rel=1e-6
        )
    theirs, mine = advice(diagnose_run(run)), advice(diagnose_run(ours))
    assert disagreements(theirs, mine) == [], (theirs.text, mine.text)
    assert theirs.verdict == "slot_bound" and theirs.model_slots == 4


def test_vllm_aggregates_only_name_the_flag_that_keeps_requests(
    ours: RunResult, tmp_path: Path
) -> None:
    path = _write(ours, tmp_path / "vllm.json", detailed=False)
    res = CliRunner().invoke(app, ["diagnose", str(path), "--json"])
    assert res.exit_code == 0, res.output
    verdicts = json.loads(res.stdout)["verdicts"]
    assert [v["id"] for v in verdicts] == ["undecided"] * 3
    assert "--save-detailed" in verdicts[0]["fixes"][0]
