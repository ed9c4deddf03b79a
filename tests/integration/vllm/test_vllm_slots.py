"""Real vLLM at ``--max-num-seqs 2``: slot-bound by construction past 2 in flight.

One closed-loop and one open-loop bench of the same server. Each level past 2 in flight
must be slot-bound with the limit 2, the run's one fix raises ``--max-num-seqs`` from 2
with a number, prompt lengths are exact through vLLM's own ``/tokenize``, and vLLM's
normal streams raise no token-count flag.
"""

from __future__ import annotations

from typing import Any

import pytest

from infersight.core.records import RunResult
from infersight.diagnose import Verdict, diagnose
from infersight.diagnose.one_voice import spoken_once
from infersight_testkit.vllm_server import VLLMServer

pytestmark = [pytest.mark.needs("vllm"), pytest.mark.timeout(900)]

TOKENS = 32


def _bench(server: VLLMServer, **kw: Any) -> RunResult:
    from infersight.bench import BenchConfig
    from infersight.entrypoints.bench import bench_and_diagnose

    cfg = BenchConfig(
        url=server.url,
        progress=False,
        diagnose=True,
        input_tokens="fixed:32",
        max_tokens=TOKENS,
        ignore_eos=True,
        sample_interval=0.25,
        **kw,
    )
    return bench_and_diagnose(cfg)


def _by_level(verdicts: list[Verdict]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for v in verdicts:
        if v.level is not None and not v.marginal:
            out.setdefault(v.level, set()).add(v.id)
    return out


@pytest.fixture(scope="module")
def closed(vllm_slots: VLLMServer) -> RunResult:
    return _bench(vllm_slots, concurrency=[1, 4, 8], requests=24)


@pytest.fixture(scope="module")
def opened(vllm_slots: VLLMServer) -> RunResult:
    # 1.6 to 2 req/s is what 2 sequences of 32 tokens give here: 0.4/s leaves slots
    # free, 2.5/s queues past them.
    return _bench(vllm_slots, rate=[0.4, 2.5], requests=16)


def _assert_slot_bound(result: RunResult, loaded: list[str], *, open_loop: bool = False) -> None:
    verdicts = diagnose(result)
    levels = _by_level(verdicts)
    for name in loaded:
        # the client-limited flag's reasons too: a late client must not hide the slots
        assert "slot_bound" in levels.get(name, set()), (levels, result.aggregates[name])
    rec = result.recommendation
    assert rec is not None
    # one voice, as in the truth suite of fake servers (docs/design.md section 9)
    assert spoken_once(rec, verdicts) is None, spoken_once(rec, verdicts)
    assert (rec.verdict, rec.limiter) == ("slot_bound", "slots"), rec
    if open_loop and rec.knob == "replicas":
        # An offered rate that twice the slots the run measured would not serve: the
        # model sends it to replicas, and says the slots could not (one constraint).
        assert "--max-num-seqs 2" in rec.text and "replicas" in rec.text, rec.text
        return
    assert rec.knob == "slots", rec
    assert rec.current == 2 and rec.direction == "up", rec
    sc = result.self_check
    assert sc is not None
    if sc.trusted:
        # A number the run supports: the model's, on vLLM's own flag.
        assert rec.target is not None and rec.target > 2, rec
        assert f"--max-num-seqs 2 → {rec.target}" in rec.text, rec.text
        assert rec.fix is not None and rec.fix.knob == "slots" and rec.fix.to_value == rec.target
    else:
        # The self-check (noise on 2 shared cores) does not support one: it says why.
        assert rec.target is None and "--max-num-seqs" in rec.text, rec
        assert "no number beyond the measured range" in rec.text + rec.rests_on, rec
    model = result.server_model
    assert model is not None and model.slots.value == 2, model.slots


def test_closed_loop_is_slot_bound_past_two(closed: RunResult) -> None:
    _assert_slot_bound(closed, ["c=4", "c=8"])
    assert "slot_bound" not in _by_level(diagnose(closed)).get("c=1", set())


def test_open_loop_is_slot_bound_past_capacity(opened: RunResult) -> None:
    _assert_slot_bound(opened, ["r=2.5"], open_loop=True)


def test_prompt_lengths_are_exact_through_vllms_tokenize(closed: RunResult) -> None:
    assert not [n for n in closed.notes if "approximate" in n], closed.notes
    prompts = {r.prompt_tokens for r in closed.records if r.ok}
    # vLLM's usage counts the chat template too: one length for every request.
    assert len(prompts) == 1 and next(iter(prompts)) >= 32, prompts


def test_vllms_streams_raise_no_token_count_flag(closed: RunResult, opened: RunResult) -> None:
    for result in (closed, opened):
        for name, agg in result.aggregates.items():
            tokens = next(c for c in agg["validity"] if c["check"] == "tokens")
            assert tokens["ok"], (name, tokens)
        assert all(r.completion_tokens == TOKENS for r in result.records if r.ok)
        assert not any(r.usage_mismatch for r in result.records)
