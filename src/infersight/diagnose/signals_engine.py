"""Server-side symbols per window (R, Q, S, kv, P, U, SM, busy), falling back to the
client's view when a target exports no engine metrics (e.g. a hosted API)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from infersight.core.numbers import number_at
from infersight.core.verdicts import Q_SUSTAINED
from infersight.diagnose.context import RunContext
from infersight.diagnose.physics.floors import decode_floor, prefill_floor
from infersight.diagnose.plateau import MIN_SCRAPES, Plateau, infer_slots
from infersight.diagnose.signals import SampleIndex, WindowStats

__all__ = ["EngineSignals", "engine_signals", "floor_record"]


@dataclass(slots=True)
class EngineSignals:
    """The docs/design.md section 5 symbols for one window, with their sources."""

    R: float | None = None
    Q: float | None = None
    Q_max: float | None = None
    Q_frac: float | None = None
    rq_source: str = ""
    inferred: bool = False
    #: Per scrape of the window: requests the client had in flight that the engine
    #: neither ran nor listed as waiting (None: no such queue was sustained).
    queued_outside: np.ndarray | None = None
    S: float | None = None
    S_source: str = ""
    #: Set when S was inferred from R's plateau (the engine exports no slot limit).
    plateau: Plateau | None = None
    kv: float | None = None
    kv_p90: float | None = None
    P: float | None = None
    U: float | None = None
    SM: float | None = None
    busy: float | None = None
    busy_source: str = ""
    mfu: float | None = None
    engine_cpu: float | None = None
    loadgen_cpu: float | None = None
    host_cpu: float | None = None
    itl_floor: float | None = None
    itl_floor_bw: float | None = None
    itl_floor_compute: float | None = None
    itl_ratio: float | None = None
    ttft_floor: float | None = None
    ttft_ratio: float | None = None
    floor_source: str = ""
    floor_batch: float | None = None
    floor_context: float | None = None
    floor_prompt: float | None = None


def _client_rq(w: WindowStats, s: EngineSignals, S: float | None) -> None:
    """R and Q from the client's in-flight count (and gateway queue delay), marked inferred."""
    inflight = w.inflight_mean
    if w.queue_delay_mean is not None and w.queue_delay_mean > 0:
        # Little's law on the gateway queue: Q = arrival rate x mean queue wait.
        rate = w.n / w.seconds
        q = min(inflight, rate * w.queue_delay_mean)
        s.Q, s.Q_max = q, float(w.inflight_max)
        s.Q_frac = 1.0 if q >= 0.5 else 0.0
        s.R = inflight - q
        s.rq_source = "client in-flight count and X-Queue-Delay (Little's law), inferred"
    elif S is not None:
        s.R = min(inflight, S)
        s.Q = max(0.0, inflight - S)
        s.Q_max = float(max(0, w.inflight_max - S))
        s.Q_frac = 1.0 if s.Q >= 0.5 else 0.0
        s.rq_source = "client in-flight count against the slot limit, inferred"
    else:
        s.R = inflight
        s.rq_source = "client in-flight count (server queue unknown), inferred"
    s.inferred = True


def _scrape_times(idx: SampleIndex, t0: float, t1: float) -> np.ndarray:
    name = (
        "engine.requests_running"
        if idx.has("engine.requests_running")
        else "engine.requests_waiting"
    )
    return idx.times(name, t0, t1)


def _held0(idx: SampleIndex, name: str, times: np.ndarray, agg: str = "sum") -> np.ndarray:
    v = idx.held(name, times, agg)
    return np.zeros(times.size) if v is None else np.nan_to_num(v)


def _queued_outside(
    idx: SampleIndex, w: WindowStats, t0: float, t1: float
) -> tuple[np.ndarray, np.ndarray] | None:
    """Per scrape in the window: requests the client had in flight that the engine
    neither ran nor listed as waiting, queued before its scheduler (an HTTP accept
    backlog, a proxy), and those the engine listed as waiting; None unless the first
    queue is sustained (docs/design.md section 5).

    Each scrape is set against the client's count at that scrape, not a mean against a
    mean: a mean of a few scrapes reads a closed-loop handover as a queue. Whether there
    is a queue is decided on the requests the engine must have seen by then
    (:class:`~infersight.diagnose.inflight.InFlight`): they must be missing at half the
    scrapes or more, as the engine's own Q must, and at least one on average (a tenth
    of those in flight at high concurrency). How long it is counts them all, since in a
    busy queue many have only just arrived.
    """
    probe = w.inflight_probe
    times = _scrape_times(idx, t0, t1)
    if probe is None or not w.n or not times.size:
        return None
    waiting = _held0(idx, "engine.requests_waiting", times)
    seen = _held0(idx, "engine.requests_running", times) + waiting
    scrape = _held0(idx, "engine.scrape_duration_seconds", times, "max")
    sure = np.clip(probe.count(times, scrape, probe.settle) - seen, 0.0, None)
    if np.mean(sure >= 1) < Q_SUSTAINED or sure.mean() < max(1.0, 0.1 * w.inflight_mean):
        return None
    return np.clip(probe.count(times, scrape) - seen, 0.0, None), waiting


def _few_scrapes(idx: SampleIndex, w: WindowStats, s: EngineSignals) -> None:
    """R and Q from the client's exact in-flight count against the slot limit (declared,
    or the fitted model's), where the window holds too few scrapes to time a queue.

    One or two scrapes are instants, not a window: in a closed loop one that lands on a
    handover (a batch done, the next not yet read by the engine) shows no queue in a
    level where half the clients wait the whole time. The client's count is known at
    every instant; above a declared limit, the rest wait (docs/design.md section 5)."""
    n = _scrape_times(idx, w.t0, w.t1).size
    probe = w.inflight_probe
    if n >= MIN_SCRAPES or s.S is None or probe is None or not w.n:
        return
    s.R, s.Q, s.Q_frac, s.Q_max = probe.split(s.S, w.t0, w.t1)
    s.queued_outside = None
    scrapes = "1 scrape" if n == 1 else f"{n} scrapes"
    s.rq_source = (
        f"client in-flight count against the slot limit S = {s.S:.0f}: the engine's "
        f"/metrics had {scrapes} in this {w.seconds:.1f} s window, too few to time a queue"
    )


def floor_record(s: EngineSignals) -> dict[str, Any]:
    """The floors of one window as stored in ``environment["physics"]["floors"]``."""
    return {
        "itl_floor_s": s.itl_floor,
        "itl_floor_bandwidth_s": s.itl_floor_bw,
        "itl_floor_compute_s": s.itl_floor_compute,
        "ttft_floor_s": s.ttft_floor,
        "batch": s.floor_batch,
        "context_tokens": s.floor_context,
        "prompt_tokens": s.floor_prompt,
        "source": s.floor_source,
    }


def _floors(s: EngineSignals, w: WindowStats, ctx: RunContext, level: str | None) -> None:
    """ITL and prefill floors (docs/design.md section 6): the run's stored ones for this
    level when it has them, else computed from the model shape and device peaks."""
    shape, dev = ctx.shape, ctx.device
    if shape is not None and dev is not None and ctx.compute_trusted:
        # MFU only against a trusted ceiling (a CPU's is calibrated from the run's knee)
        flops = (w.output_tps + w.prompt_tps) * 2.0 * shape.n_active_params
        peak = dev.peak_flops("bf16")
        s.mfu = flops / peak if peak else None
    stored = ctx.stored_floors.get(level) if level is not None else None
    if isinstance(stored, dict) and number_at(stored, "itl_floor_s") is not None:
        s.itl_floor = number_at(stored, "itl_floor_s")
        s.itl_floor_bw = number_at(stored, "itl_floor_bandwidth_s")
        s.itl_floor_compute = number_at(stored, "itl_floor_compute_s")
        s.ttft_floor = number_at(stored, "ttft_floor_s")
        s.floor_batch = number_at(stored, "batch")
        s.floor_context = number_at(stored, "context_tokens")
        s.floor_prompt = number_at(stored, "prompt_tokens")
        s.floor_source = f"{stored.get('source') or 'roofline'} (stored in the run)"
    elif shape is not None and dev is not None:
        ctx_tokens = (w.prompt_mean or 0.0) + (w.output_mean or 0.0) / 2
        batch = max(1, round(s.R or 1.0))
        f = decode_floor(shape, dev, batch=batch, context=ctx_tokens)
        s.itl_floor, s.itl_floor_bw, s.itl_floor_compute = f.itl_s, f.bandwidth_s, f.compute_s
        s.floor_batch, s.floor_context = float(batch), ctx_tokens
        if w.prompt_mean:
            s.floor_prompt = float(max(1, round(w.prompt_mean)))
            s.ttft_floor = prefill_floor(shape, dev, tokens=round(s.floor_prompt)).ttft_s
        s.floor_source = f"roofline: {shape.name} on {dev.describe()}"
    else:
        return
    if w.itl_p50 is not None and s.itl_floor:
        s.itl_ratio = w.itl_p50 / s.itl_floor
    if w.ttft_sent_p50 is not None and s.ttft_floor:
        s.ttft_ratio = w.ttft_sent_p50 / s.ttft_floor


def engine_signals(
    idx: SampleIndex, w: WindowStats, ctx: RunContext, level: str | None = None
) -> EngineSignals:
    """Compute the symbols of one window from samples, records and physics."""
    t0, t1 = w.t0, w.t1
    s = EngineSignals(S=ctx.slots, S_source=ctx.slots_source)
    s.R = idx.mean_sum("engine.requests_running", t0, t1)
    s.Q = idx.mean_sum("engine.requests_waiting", t0, t1)
    if s.R is not None or s.Q is not None:
        s.R = s.R or 0.0
        s.Q = s.Q or 0.0
        s.Q_max = idx.max_sum("engine.requests_waiting", t0, t1) or 0.0
        s.Q_frac = idx.frac_positive("engine.requests_waiting", t0, t1) or 0.0
        s.rq_source = "engine /metrics (engine.requests_running / engine.requests_waiting)"
        found = _queued_outside(idx, w, t0, t1)
        if found is not None:
            outside, waiting = found
            total = outside + waiting
            s.Q, s.Q_max = float(total.mean()), max(s.Q_max, float(total.max()))
            s.Q_frac = max(s.Q_frac, float(np.mean(total >= 0.5)))
            s.queued_outside = outside
            s.rq_source = (
                "engine /metrics running + client in-flight count at each scrape (requests "
                "waiting before the engine's scheduler)"
            )
    else:
        if s.S is None and ctx.curve_slots is not None:
            s.S, s.S_source = ctx.curve_slots, ctx.curve_slots_source
        _client_rq(w, s, s.S)
    if s.S is None and not s.inferred:
        held_out = s.queued_outside if s.queued_outside is not None else 0.0
        s.plateau = infer_slots(idx, t0, t1, queued_outside=held_out)
        if s.plateau is not None:
            s.S, s.S_source = float(s.plateau.slots), s.plateau.source()
        elif ctx.curve_slots is not None:  # too few scrapes: the curve's shape tells
            s.S, s.S_source = ctx.curve_slots, ctx.curve_slots_source
    if not s.inferred:
        _few_scrapes(idx, w, s)
    s.kv = idx.mean_avg("engine.kv_cache_usage", t0, t1)
    s.kv_p90 = idx.max_quantile("engine.kv_cache_usage", 0.9, t0, t1)
    s.P = idx.counter_rate("engine.preemptions_total", t0, t1)
    s.U = idx.mean_avg("gpu.utilization", t0, t1)
    s.SM = idx.mean_avg("gpu.sm_activity", t0, t1)
    s.engine_cpu = idx.mean_sum("process.cpu_percent", t0, t1, name="engine")
    s.loadgen_cpu = idx.mean_sum("process.cpu_percent", t0, t1, name="loadgen")
    s.host_cpu = idx.mean_avg("host.cpu_percent", t0, t1, cpu="all")
    _floors(s, w, ctx, level)
    if s.U is not None:
        s.busy, s.busy_source = s.U, "NVML gpu.utilization"
        if s.SM is not None:
            s.busy, s.busy_source = s.SM, "NVML gpu.sm_activity"
    elif ctx.engine in ("embedded", "llamacpp") and s.engine_cpu is not None:
        # No GPU: the engine process's CPU is the device. Spinning threads keep it near
        # 100% per thread even for one sequence, so the compute actually used (MFU)
        # plays the role SM activity plays on a GPU.
        threads, how = ctx.threads, "threads"
        if not threads:  # a recording does not say: the host's cores bound the threads
            threads = (
                len([lab for lab in idx.labels("host.cpu_percent") if lab.get("cpu") != "all"]) or 1
            )
            how = "host cores (the engine's threads are not recorded)"
        s.U = min(1.0, s.engine_cpu / (100.0 * threads))
        s.busy, s.busy_source = s.U, f"engine process CPU / {threads} {how}"
        if s.mfu is not None:
            s.SM = min(1.0, s.mfu)
            s.busy, s.busy_source = s.SM, "model FLOP/s over the measured CPU peak (MFU)"
    if s.Q is not None and s.Q_frac is None:
        s.Q_frac = 1.0 if s.Q >= 0.5 else 0.0
    if s.R is not None and math.isnan(s.R):
        s.R = None
    return s
