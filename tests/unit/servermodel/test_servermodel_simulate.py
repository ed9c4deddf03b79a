"""The model run forward: the simulation's own arithmetic, where it has a closed form."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from infersight.servermodel.evaluate import figures, poisson_arrivals
from infersight.servermodel.simulate import Engine, Load, Simulated, simulate


def _engine(**kw: float | None) -> Engine:
    base: dict[str, float | None] = dict(
        slots=4.0, kv=None, a=0.01, b=0.0, k=0.0, c=0.0, e=0.02, kappa=1.0, c_first=0.0
    )
    base.update(kw)
    return Engine(kv_reserve=True, **base)  # type: ignore[arg-type]


def _load(**kw: object) -> Load:
    args: dict[str, object] = {"prompt": np.array([32.0]), "output": np.array([11.0])}
    args.update(kw)
    return Load(**args)  # type: ignore[arg-type]


def test_one_client_alone_takes_first_token_plus_its_steps() -> None:
    sim = simulate(_engine(), _load(clients=1, count=20))
    # first token e + kappa x step(1) = 0.03 s, then 10 steps of 0.01 s
    assert np.allclose(sim.first - sim.start, 0.03)
    assert np.allclose(sim.end - sim.first, 0.10)
    assert sim.ok.all() and sim.arrival.size == 20


def test_slots_queue_the_rest_in_arrival_order() -> None:
    sim = simulate(_engine(slots=2.0), _load(clients=6, count=60))
    waited = sim.start > sim.arrival + 1e-9
    assert waited.mean() > 0.5  # 6 clients on 2 slots: most wait
    assert np.all(np.diff(sim.start[np.argsort(sim.arrival, kind="stable")]) >= -1e-12)
    p = figures(sim, concurrency=6)
    # two at a time, 0.13 s each
    assert p.throughput == pytest.approx(2 / 0.13, rel=0.05)


def test_a_step_that_grows_past_k_caps_throughput() -> None:
    """Past k = 2 every step takes running / 2 times longer: 8 clients get no more
    than 2 would (the device computes as fast as it can)."""
    eng = _engine(slots=16.0, a=0.01, b=0.005, k=2.0, e=0.0, kappa=1.0)
    two = figures(simulate(eng, _load(clients=2, count=200)), concurrency=2)
    eight = figures(simulate(eng, _load(clients=8, count=400)), concurrency=8)
    assert eight.throughput == pytest.approx(two.throughput, rel=0.15)
    assert (eight.tpot_p50 or 0) == pytest.approx(4 * (two.tpot_p50 or 0), rel=0.05)


def test_an_admitted_prompt_holds_up_every_running_request() -> None:
    slow = _engine(c=0.001)  # 32 prompt tokens: a 32 ms prefill step for the others
    fast = figures(simulate(_engine(), _load(clients=4, count=200)), concurrency=4)
    held = figures(simulate(slow, _load(clients=4, count=200)), concurrency=4)
    assert (held.tpot_p50 or 0) > (fast.tpot_p50 or 0) * 1.2


def test_kv_admits_only_what_fits() -> None:
    # 4 slots but room for 2 requests of 32 + 11 tokens
    sim = simulate(_engine(kv=90.0), _load(clients=8, count=80))
    p = figures(sim, concurrency=8)
    assert p.running is not None and p.running <= 2.05


def test_errors_fail_at_once_and_every_request_ends() -> None:
    sim = simulate(_engine(error_share=0.2), _load(arrivals=poisson_arrivals(20, 20, seed=3)))
    assert np.isfinite(sim.end).all()
    assert 0.12 < 1 - sim.ok.mean() < 0.28
    assert np.all(sim.end[~sim.ok] == sim.arrival[~sim.ok])


def test_an_open_loop_past_capacity_is_unsustainable() -> None:
    eng = _engine(slots=1.0)  # 1 / 0.13 s = 7.7 req/s
    p = figures(simulate(eng, _load(arrivals=poisson_arrivals(15, 20, seed=1))), rate=15.0)
    assert p.sustainable is False and (p.throughput or 0) < 8.5


@pytest.mark.parametrize("clients", [7, 10**12])
def test_a_closed_loop_sends_its_count_however_many_clients(clients: int) -> None:
    # Clients past the count never send; a level of 10^12 clients (an imported file
    # can say so) costs what its 7 requests cost.
    sim = simulate(_engine(), _load(clients=clients, count=7))
    assert sim.arrival.size == 7 and sim.ok.all() and np.isfinite(sim.end).all()


def _kv_engine(reserve: bool) -> Engine:
    return Engine(
        slots=64, kv=400, kv_reserve=reserve, a=0.005, b=0, k=0, c=0, e=0.045, kappa=1, c_first=0
    )


def _kv_load(max_tokens: float) -> Load:
    return Load(
        prompt=np.array([20.0]),
        output=np.array([max_tokens]),
        clients=16,
        count=400,
        max_tokens=max_tokens,
    )


def _running(s: Simulated) -> float:
    """The mean admitted count over the steady middle of the run."""
    ts = np.linspace(1.0, float(np.nanmax(s.end)) - 1.0, 200)
    return float(np.mean([np.sum((s.start <= t) & (s.end > t)) for t in ts]))


def test_kv_reserved_at_admission_follows_max_tokens() -> None:
    # 400 tokens of KV, 20-token prompts: 20 + 80 reserved lets 4 run, 20 + 20 lets 10
    assert _running(simulate(_kv_engine(True), _kv_load(80))) == pytest.approx(4, abs=0.2)
    assert _running(simulate(_kv_engine(True), _kv_load(20))) == pytest.approx(10, abs=0.3)


def test_kv_on_demand_is_held_in_whole_blocks() -> None:
    """vLLM allocates blocks (128 tokens on its CPU build): 512 tokens of KV run 3
    requests of 130 + 16 tokens where tokens count, 2 where each holds 2 blocks. At 120
    + 16 each is admitted in one block and needs a second at its 128th token: those
    past the cache's 4 blocks are preempted and recomputed, never lost."""

    def run(prompt: float, block: float, kv: float | None = 512, slots: float = 64) -> Simulated:
        eng = Engine(
            slots=slots, kv=kv, kv_reserve=False, a=0.005, b=0, k=0, c=0, e=0.045, kappa=1,
            c_first=0, block=block,
        )  # fmt: skip
        load = Load(prompt=np.array([prompt]), output=np.array([16.0]), clients=8, count=200)
        return simulate(eng, load)

    assert _running(run(130.0, 1.0)) == pytest.approx(3, abs=0.2)
    assert _running(run(130.0, 128.0)) == pytest.approx(2, abs=0.2)
    edge = run(120.0, 128.0)
    assert np.all(np.isfinite(edge.end)) and np.all(np.isfinite(edge.first))
    assert _running(edge) <= 4.0
    # a block size with no KV capacity known (vLLM exports it whatever the fit found)
    assert _running(run(130.0, 128.0, kv=None, slots=4)) == pytest.approx(4, abs=0.2)


def test_kv_on_demand_preempts_and_recomputes() -> None:
    """On demand (vLLM) more start than fit when grown; the latest admitted is evicted
    and recomputed, so throughput is well under what 16 unlimited sequences give, and
    above what reserving prompt + max_tokens gives."""
    free = simulate(
        Engine(
            slots=64, kv=None, kv_reserve=False, a=0.005, b=0, k=0, c=0, e=0.045, kappa=1, c_first=0
        ),
        _kv_load(80),
    )
    grow = simulate(_kv_engine(False), _kv_load(80))
    reserve = simulate(_kv_engine(True), _kv_load(80))

    def rate(s: Simulated) -> float:
        return 400 / float(np.nanmax(s.end) - np.nanmin(s.arrival))

    assert rate(reserve) < rate(grow) < 0.6 * rate(free)
    # a request evicted mid-answer keeps its first token: its end is later, never its first
    assert np.all(np.isfinite(grow.first)) and np.all(grow.end > grow.first)
    assert float(np.max(grow.end - grow.first)) > 2 * float(np.min(grow.end - grow.first))


def test_prompts_admitted_together_share_one_batched_prefill() -> None:
    """vLLM's and llama.cpp's schedulers prefill every waiting prompt in one step: four
    clients sending at once all get their first token when the four prompts are done,
    and a prompt admitted while that step runs waits for it to end."""
    eng = _engine(slots=8.0, e=0.0, kappa=0.0, c_first=1e-3, batch_prefill=True)
    sim = simulate(eng, _load(clients=4, count=4))
    assert np.allclose(sim.first - sim.start, 4 * 32 * 1e-3)
    each = simulate(_engine(slots=8.0, e=0.0, kappa=0.0, c_first=1e-3), _load(clients=4, count=4))
    assert np.allclose(each.first - each.start, 32 * 1e-3)
    late = simulate(eng, _load(arrivals=np.array([0.0, 0.02, 0.02])))
    # the first prompt's step ends at 0.032; the two admitted during it (a step, 0.01 s,
    # after it began) share the next
    assert late.first[0] == pytest.approx(0.032)
    assert np.allclose(late.first[1:], 0.032 + 2 * 0.032)


def test_a_prompt_waits_for_the_step_in_progress_and_clients_stay_in_waves() -> None:
    """Two clients whose answers end a step apart (47 and 48 tokens): the scheduler
    takes the first one's next prompt only once the step in progress ends, which is
    the other's last token, so both next prompts share one prefill and the clients keep
    moving in waves (the embedded engine's c=2 level), instead of each prompt stalling
    the other's last token and the two drifting apart."""
    eng = _engine(slots=8.0, e=0.0, kappa=0.0, c=1e-3, c_first=3e-3, batch_prefill=True)
    sim = simulate(eng, _load(clients=2, count=12, output=np.array([48.0, 47.0])))
    order = np.argsort(sim.arrival, kind="stable")
    first = sim.first[order].reshape(-1, 2)
    assert np.allclose(first[:, 0], first[:, 1])
    # every wave's prefill is both prompts (2 x 32 tokens x 3 ms) after the later send
    later = sim.arrival[order].reshape(-1, 2).max(axis=1)
    assert np.allclose(first[:, 0] - later, 2 * 32 * 3e-3)


@given(
    waited=st.floats(min_value=0.0, max_value=1.0),
    n=st.integers(min_value=4, max_value=400),
)
def test_the_medians_band_spans_the_cliff_a_level_of_its_size_may_land_on(
    waited: float, n: int
) -> None:
    """Requests that either start at once (0.1 s) or wait a whole service (1.1 s): a
    measured level of ``n`` requests may find its median on either side where the share
    that waits is within the median's sampling error of one half."""
    m = 2000
    late = np.arange(m) < round(waited * m)
    first = np.where(late, 1.1, 0.1)
    zeros = np.zeros(m)
    sim = Simulated(zeros, zeros, first, first + 1.0, zeros + 8, zeros + 4, np.ones(m, bool))
    band = figures(sim, concurrency=1, band_n=n).ttft_p50_band
    assert band is not None and band[0] <= band[1]
    half = 1.96 * np.sqrt(0.25 / n)
    if abs(waited - 0.5) < half - 0.01:
        assert band == (pytest.approx(0.1), pytest.approx(1.1))  # either side
    elif abs(waited - 0.5) > half + 0.01:
        assert band[0] == band[1]  # one side, whatever the sample
