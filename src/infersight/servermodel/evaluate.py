"""The model's figures for a load: simulate, then aggregate the simulated requests
exactly as bench aggregates real ones (same window, throughput span and percentiles),
so a prediction and a measurement mean the same thing.
"""

from __future__ import annotations

import math

import numpy as np

from infersight.core.records import RequestRecord
from infersight.core.server_model import Prediction, ServerModel
from infersight.servermodel.data import LevelData, RunData, level_figures
from infersight.servermodel.simulate import Engine, Load, Simulated, simulate
from infersight.stats.aggregate import aggregate

__all__ = [
    "engine_of",
    "figures",
    "level_workload",
    "poisson_arrivals",
    "predict_load",
    "prompt_fill",
]


def engine_of(
    m: ServerModel,
    *,
    slots: float | None = None,
    kv: float | None = None,
    saturate: float | None = None,
    flat: float | None = None,
) -> Engine:
    """The simulation's engine from a fitted model (``slots``/``kv``: overridden;
    ``saturate``: the step time grows in proportion to the running count past it;
    ``flat``: it stays as it is there past it)."""

    def v(p: object) -> float:
        val = getattr(p, "value", None)
        return float(val) if isinstance(val, int | float) and math.isfinite(val) else 0.0

    kv_tokens = kv if kv is not None else (m.kv_tokens.value if m.kv_tokens is not None else None)
    return Engine(
        slots=slots if slots is not None else m.slots.value,
        kv=kv_tokens,
        kv_reserve=m.kv_mode == "reserve",
        block=max(1.0, m.kv_block),
        a=max(v(m.a), 1e-6),
        b=v(m.b),
        k=v(m.k),
        c=v(m.c),
        e=v(m.e),
        kappa=v(m.kappa),
        c_first=v(m.c_first),
        batch_prefill=m.prefill_mode == "batched",
        error_share=m.error_share,
        saturate=saturate,
        flat=flat,
    )


def records_of(sim: Simulated, level: str, lag: np.ndarray | None = None) -> list[RequestRecord]:
    """Bench's records for simulated requests (first and last token only); ``lag``:
    each request was meant to be sent that much before it arrived."""
    out: list[RequestRecord] = []
    order = np.argsort(sim.arrival, kind="stable")
    late = np.zeros(sim.arrival.size) if lag is None else np.asarray(lag, dtype=float)
    for j, i in enumerate(order):
        a, f, e, n = (
            float(sim.arrival[i]),
            float(sim.first[i]),
            float(sim.end[i]),
            int(sim.output[i]),
        )
        meant = a - float(late[j]) if j < late.size else a
        good = bool(sim.ok[i]) and math.isfinite(f)
        chunks = ([f] if n <= 1 else [f, e]) if good else []
        toks = ([1] if n <= 1 else [1, n - 1]) if good else []
        out.append(
            RequestRecord(
                request_id=f"{level}-{i}",
                scheduled=meant,
                sent=a,
                chunk_times=chunks,
                chunk_tokens=toks,
                end=e if math.isfinite(e) else None,
                status=200 if good else 503,
                ok=good,
                error=None if good else "Overloaded",
                prompt_tokens=int(sim.prompt[i]),
                completion_tokens=n if good else None,
                labels={"level": level},
            )
        )
    return out


def figures(
    sim: Simulated,
    *,
    concurrency: int | None = None,
    rate: float | None = None,
    slo: dict[str, float] | None = None,
    lag: np.ndarray | None = None,
    band_n: int | None = None,
) -> Prediction:
    """Bench's figures of a simulated level (``lag``: see :func:`records_of`;
    ``band_n``: the requests of the measured level the TTFT median's band is for)."""
    recs = records_of(sim, "model", lag)
    if not recs:
        return Prediction()
    agg = aggregate(
        recs, target_concurrency=concurrency, target_rate=rate, slo=slo or None, check_lag=False
    )
    f = level_figures(agg)
    # while the load was applied: the drain after the last send is no operating point
    # (how many ran in it depends on where the last answers happen to end)
    last = float(sim.arrival.max())
    t = np.linspace(
        float(sim.arrival.min()),
        last if last > sim.arrival.min() else float(np.nanmax(sim.end)),
        200,
    )
    run = np.searchsorted(
        np.sort(sim.start[np.isfinite(sim.start)]), t, side="right"
    ) - np.searchsorted(np.sort(sim.end[np.isfinite(sim.start)]), t, side="right")
    inflight = np.searchsorted(np.sort(sim.arrival), t, side="right") - np.searchsorted(
        np.sort(sim.end), t, side="right"
    )
    got = agg.get("sustainability")
    sus: dict[str, object] = got if isinstance(got, dict) else {}
    good = f.get("goodput") if slo else f.get("throughput")
    verdict = agg.get("slo")
    met = bool(verdict.get("met")) if slo and isinstance(verdict, dict) else None
    return Prediction(
        throughput=f["throughput"],
        goodput=good,
        ttft_p50=f["ttft_p50"],
        ttft_p50_band=_median_band(sim, band_n) if band_n else None,
        ttft_p99=f["ttft_p99"],
        tpot_p50=f["tpot_p50"],
        e2e_p50=f["e2e_p50"],
        e2e_p99=f["e2e_p99"],
        running=float(np.mean(run)),
        waiting=float(np.mean(inflight - run)),
        queued=float(np.mean(sim.start[sim.ok] > sim.arrival[sim.ok] + 1e-3))
        if sim.ok.any()
        else None,
        sustainable=bool(sus.get("sustainable")) if sus.get("judged") else None,
        slo_met=met,
    )


def _median_band(sim: Simulated, n: int) -> tuple[float, float] | None:
    """The 95% band of the median of ``n`` requests drawn from the simulated first
    tokens: the quantiles 0.5 ± 1.96·√(0.25/n) (the median's order statistics)."""
    ok = sim.ok & np.isfinite(sim.first)
    if not ok.any():
        return None
    ttft = sim.first[ok] - sim.arrival[ok]
    half = 1.96 * math.sqrt(0.25 / max(1, n))
    lo, hi = np.quantile(ttft, [max(0.0, 0.5 - half), min(1.0, 0.5 + half)])
    return float(lo), float(hi)


def poisson_arrivals(rate: float, duration: float, seed: int = 0) -> np.ndarray:
    """Poisson arrival times at ``rate`` req/s over ``duration`` seconds."""
    rng = np.random.default_rng(seed)
    n = max(1, int(rate * duration * 1.2) + 10)
    t = np.cumsum(rng.exponential(1.0 / rate, n))
    return t[t < duration]


def prompt_fill(d: RunData) -> float:
    """The prompt length a request that did not report one is taken to have: the run's mean."""
    return float(np.nanmean(d.prompt)) if np.isfinite(d.prompt).any() else 0.0


def level_workload(d: RunData, lv: LevelData) -> tuple[np.ndarray, np.ndarray]:
    """A level's (prompt, output) lengths to run the model on: its answered requests (all
    of them when none was answered), unknown prompts at :func:`prompt_fill`, outputs >= 1."""
    idx = lv.idx[d.ok[lv.idx]] if d.ok[lv.idx].any() else lv.idx
    return np.nan_to_num(d.prompt[idx], nan=prompt_fill(d)), np.maximum(d.output[idx], 1.0)


def predict_load(
    m: ServerModel,
    prompt: np.ndarray,
    output: np.ndarray,
    *,
    slots: float | None = None,
    kv: float | None = None,
    rate: float | None = None,
    concurrency: int | None = None,
    think: float = 0.0,
    replicas: int = 1,
    requests: int = 1500,
    slo: dict[str, float] | None = None,
    seed: int = 0,
    saturate: float | None = None,
    max_tokens: float | None = None,
    flat: float | None = None,
    band_n: int | None = None,
) -> Prediction:
    """The model's figures at a load: ``rate`` req/s (Poisson) or ``concurrency``
    clients, spread evenly over ``replicas`` (throughput and goodput are the fleet's);
    ``saturate``, ``flat``: see ``engine_of``; ``max_tokens``: what each request asks for (the
    run's own by default), which an engine reserving KV at admission holds; ``band_n``:
    see :func:`figures`."""
    eng = engine_of(m, slots=slots, kv=kv, saturate=saturate, flat=flat)
    reps = max(1, replicas)
    cap = max_tokens if max_tokens is not None else m.measured.get("max_tokens")
    if rate is not None:
        per = rate / reps
        load = Load(
            prompt=prompt,
            output=output,
            seed=seed,
            arrivals=poisson_arrivals(per, max(5.0, requests / per), seed),
            max_tokens=cap,
        )
        p = figures(simulate(eng, load), rate=per, slo=slo, band_n=band_n)
    else:
        n = max(1, math.ceil((concurrency or 1) / reps))
        load = Load(
            prompt=prompt,
            output=output,
            clients=n,
            think=think,
            count=requests,
            seed=seed,
            max_tokens=cap,
        )
        p = figures(simulate(eng, load), concurrency=n, slo=slo, band_n=band_n)
    if reps > 1:
        p.throughput = None if p.throughput is None else p.throughput * reps
        p.goodput = None if p.goodput is None else p.goodput * reps
    return p
