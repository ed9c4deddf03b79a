"""``vllm bench serve`` files made by the real tool, against real vLLM at 2 sequences.

Closed loop (``--max-concurrency``) and open loop (``--request-rate``), with
``--save-detailed``, each get the verdict and fix that infersight's own bench of the same
server gets; without ``--save-detailed`` the verdict names what is missing. vLLM's
benchmark gates a closed loop with a semaphore and every request "arrives" at once: no
request is late, so no closed-loop file is client-limited. An open loop's sends are due
on a schedule; where vLLM's own client sent late (``queue_times``; on cores shared with
the server it does), the file is flagged client-limited, beside the same verdict.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infersight.core.records import RunResult
from infersight.diagnose import embed_diagnosis
from infersight.importers import import_file
from infersight_testkit.tool_runs import run_vllm_bench
from infersight_testkit.vllm_server import VLLMServer, vllm_model_dir

pytestmark = [pytest.mark.needs("vllm"), pytest.mark.timeout(900)]

TOKENS, PROMPT, N = 32, 32, 16


def _vllm_file(server: VLLMServer, out: Path, **kw: object) -> RunResult:
    tok = vllm_model_dir()
    assert tok is not None
    path = run_vllm_bench(
        server.url,
        out,
        model=server.model,
        tokenizer=tok,
        prompts=N,
        input_len=PROMPT,
        output_len=TOKENS,
        **kw,  # type: ignore[arg-type]
    )
    result = import_file(path)
    embed_diagnosis(result)
    return result


def _ours(server: VLLMServer, **kw: object) -> RunResult:
    from infersight.bench import BenchConfig
    from infersight.entrypoints.bench import bench_and_diagnose

    cfg = BenchConfig(
        url=server.url,
        progress=False,
        requests=N,
        input_tokens=f"fixed:{PROMPT}",
        max_tokens=TOKENS,
        ignore_eos=True,
        sample_interval=0.25,
        **kw,  # type: ignore[arg-type]
    )
    return bench_and_diagnose(cfg)


def _same_advice(theirs: RunResult, ours: RunResult, file: Path) -> None:
    a, b = theirs.recommendation, ours.recommendation
    assert a is not None and b is not None
    assert (a.verdict, a.knob, a.direction) == (b.verdict, b.knob, b.direction), (a, b)
    assert a.verdict == "slot_bound" and a.limiter == b.limiter == "slots", (a, b)
    # Flagged only where vLLM's client really sent late: its own queue_times say so
    # (all zero in a closed loop: the semaphore's wait is no lag).
    late = max(json.loads(file.read_text()).get("queue_times") or [0.0])
    flagged = any(v.id == "client_limited" for v in theirs.diagnosis)
    assert not flagged or late > 0.005, (late, theirs.diagnosis)
    model = theirs.server_model
    assert model is not None and model.slots.value == 2, (model and model.slots, _times(theirs))


def _times(run: RunResult) -> str:
    """Each request's send, first token and end (ms from the first send), so that a slot
    fit that fails in CI can be replayed from its output (the file is gone with the run)."""
    t0 = min((r.sent or r.scheduled) for r in run.records)
    return "; ".join(
        f"{1e3 * ((r.sent or r.scheduled) - t0):.0f}/"
        f"{1e3 * (r.chunk_times[0] - t0) if r.chunk_times else float('nan'):.0f}/"
        f"{1e3 * ((r.end or t0) - t0):.0f}"
        for r in run.records
    )


def test_closed_loop_file_gets_our_verdict(vllm_slots: VLLMServer, tmp_path: Path) -> None:
    theirs = _vllm_file(vllm_slots, tmp_path / "c8.json", max_concurrency=8)
    assert list(theirs.aggregates) == ["c=8"]
    _same_advice(theirs, _ours(vllm_slots, concurrency=[8]), tmp_path / "c8.json")
    assert not any(v.id == "client_limited" for v in theirs.diagnosis), theirs.diagnosis


def test_open_loop_file_gets_our_verdict(vllm_slots: VLLMServer, tmp_path: Path) -> None:
    theirs = _vllm_file(vllm_slots, tmp_path / "r5.json", request_rate=5.0)
    assert list(theirs.aggregates) == ["r=5"]
    _same_advice(theirs, _ours(vllm_slots, rate=[5.0]), tmp_path / "r5.json")


def test_a_file_without_requests_names_what_is_missing(
    vllm_slots: VLLMServer, tmp_path: Path
) -> None:
    tok = vllm_model_dir()
    assert tok is not None
    path = run_vllm_bench(
        vllm_slots.url,
        tmp_path / "agg.json",
        model=vllm_slots.model,
        tokenizer=tok,
        prompts=N,
        input_len=PROMPT,
        output_len=TOKENS,
        max_concurrency=8,
        detailed=False,
    )
    # As a user would: `infersight diagnose FILE --json`.
    out = subprocess.run(
        [str(Path(sys.executable).parent / "infersight"), "diagnose", str(path), "--json"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    doc = json.loads(out)
    assert {v["id"] for v in doc["verdicts"]} == {"undecided"}, doc["verdicts"]
    text = json.dumps(doc["verdicts"])
    assert "--save-detailed" in text, text
