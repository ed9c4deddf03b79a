"""Fitting the model of docs/design.md section 9 to a run.

1. **Slots.** Stated (``--engine-slots``) or exported by the engine: taken as given.
   Else the smallest S for which replaying the arrivals and ends through FIFO
   admission (:mod:`.admission`) leaves no request with its first token before its
   admission; S at the run's highest in-flight count means no limit was reached.
2. **KV.** Where the engine exports KV usage: the tokens held by the admitted
   requests at each scrape over the usage it reported, for both ways of holding
   tokens (reserved at admission, or grown as computed); the steadier one is kept.
   Where the KV cache filled (usage ≥ 90%), admissions are replayed against KV and
   the slots together.
3. **Step time.** ``a + b·max(0, n - k)`` per decode step with ``n`` running, plus
   ``c`` seconds per prompt token prefilled in the step. Each request's tokens must
   be what its time at each running count, less the prefill steps of the requests
   admitted meanwhile, buys: least squares on the log of that ratio (scipy), profiled
   over ``k``.
4. **First token.** ``e + κ·step(n) + c_first·p`` after admission (bounded linear
   least squares), with ``p`` the request's own prompt, or the prompts prefilled in
   batch with and ahead of it where the run had such batches and they explain the
   first tokens clearly better (:mod:`.first_token`). Under KV allocated as tokens
   are made, only the requests admitted when sent are fitted (their admission is
   known).
Intervals are 95%, from the fit's Jacobian (step and first token), the profile of
``k``, and the range of S consistent with the records.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import least_squares, nnls

from infersight.core.server_model import Param, ServerModel
from infersight.servermodel.admission import reconstruct
from infersight.servermodel.data import RunData
from infersight.servermodel.features import DecodeFeatures, decode_features, step_time
from infersight.servermodel.first_token import estimate, fit_first_token
from infersight.servermodel.limits import Slots, find_slots, fit_kv, kv_need, level_slots

__all__ = ["MAX_FIT_REQUESTS", "fit_model"]

#: Requests used by the step-time fit (a random subset beyond this: the fit's cost).
MAX_FIT_REQUESTS = 3000
#: The decode fit leaves out the answers whose span met a preemption where at least
#: this share of them met none (else every answer is used, as a run that preempted
#: throughout shows no step without its stalls).
MIN_CALM_SHARE = 0.2


def _misfit(f: DecodeFeatures, a: float, b: float, c: float, k: float) -> np.ndarray:
    """Per request, the log of the tokens the step ``(a, b, c, k)`` makes in its decode
    span over the tokens it made."""
    d = step_time(f.counts, a, b, k)
    scale = np.clip(1.0 - c * f.prefill / np.maximum(f.span, 1e-9), 1e-3, 1.0)
    made = (f.tau / d[None, :]).sum(axis=1) * scale
    return np.asarray(np.log(np.maximum(made, 1e-9) / f.steps), dtype=float)


def _decode_fit(
    f: DecodeFeatures,
) -> tuple[tuple[float, float, float, float], np.ndarray, tuple[float, float]]:
    """(a, b, c, k), the covariance of (a, b, c), and k's interval.

    A step time that grows with ``n`` (b > 0 past k) is kept only when it explains the
    records better than a flat one by more than its two extra parameters cost (BIC),
    and the run spent 5% of its decode time at two thirds of its top running
    count or less: a run whose running count hardly varied says nothing about growth.
    """
    tpot = f.span / f.steps
    a0 = float(np.median(tpot))
    top = float(f.counts.max()) if f.counts.size else 1.0

    def solve(k: float | None) -> tuple[float, np.ndarray, np.ndarray]:
        free = np.array([True, k is not None, True])  # a, b (flat: none), c

        def full(x: np.ndarray) -> np.ndarray:
            v = np.zeros(3)
            v[free] = x
            return v

        def resid(x: np.ndarray) -> np.ndarray:
            a, b, c = full(x)
            return _misfit(f, a, b, c, k or 0.0)

        x0 = np.array([a0, a0 * 0.1, 0.0])[free]
        r = least_squares(
            resid,
            x0=x0,
            bounds=([1e-6] + [0.0] * (x0.size - 1), [np.inf] * x0.size),
            loss="soft_l1",
            f_scale=0.1,
        )
        jac = np.zeros((r.fun.size, 3))
        jac[:, free] = r.jac
        return float(np.sum(r.fun**2)), full(r.x), jac

    m = max(1, f.steps.size)
    sse_flat, x_flat, jac_flat = solve(None)
    # the hinge: chosen on the linear form (TPOT = a + b·mean(max(0, n - k)) + c·prefill
    # per step: one least-squares solve per candidate), then fitted exactly once
    w = f.tau / np.maximum(f.tau.sum(axis=1, keepdims=True), 1e-12)
    per_step = f.prefill / np.maximum(f.steps, 1.0)
    # at most 24 candidates, spaced geometrically over the counts that occur
    grid = np.unique(np.floor(np.geomspace(1.0, max(top, 1.0), 24))) if top > 1 else np.zeros(0)
    cands = grid[grid < top]
    lin: list[tuple[float, float]] = []
    for k in [0.0, *cands.tolist()]:
        x_k = (w * np.maximum(0.0, f.counts[None, :] - k)).sum(axis=1)
        design = np.column_stack([np.ones(m), x_k, per_step]) / tpot[:, None]
        coef, _ = nnls(design, np.ones(m))
        lin.append((float(k), float(np.sum((design @ coef - 1.0) ** 2))))
    sse_by_k: list[tuple[float, float]] = []
    best = (sse_flat, x_flat, jac_flat, top)
    if lin:
        k_best = min(lin, key=lambda kv: kv[1])[0]
        sse, x, jac = solve(k_best)
        sse_by_k = [(k, v * sse / max(min(v for _, v in lin), 1e-12)) for k, v in lin]
        if sse < best[0]:
            best = (sse, x, jac, k_best)
    sse, x, jac, k = best
    bic_gain = m * math.log(max(sse_flat, 1e-12) / max(sse, 1e-12))
    # growth needs the run to have measured few and many running: at least 5% of
    # the decode time at two thirds of the top count or less
    spread = float(f.tau[:, f.counts <= top / 1.5].sum() / max(f.tau.sum(), 1e-12))
    if k != top and (bic_gain <= 2.0 * math.log(m) or spread < 0.05):
        sse, x, jac, k = sse_flat, x_flat, jac_flat, top  # growth not shown: flat
    sigma2 = sse / max(1, m - 4)
    cov = np.linalg.pinv(jac.T @ jac) * sigma2
    if k == top:
        return (float(x[0]), 0.0, float(x[2]), float(k)), cov, (top, top)
    # k's interval: the values whose fit is within a chi-square(1) step of the best
    near = [kk for kk, s in sse_by_k if (s - sse) / max(sigma2, 1e-12) <= 3.84]
    return (float(x[0]), float(x[1]), float(x[2]), float(k)), cov, (min(near), max(near))


def _sample(rng: np.random.Generator, idx: np.ndarray) -> np.ndarray:
    return (
        np.sort(rng.choice(idx, MAX_FIT_REQUESTS, replace=False))
        if idx.size > MAX_FIT_REQUESTS
        else idx
    )


def _sure_admissions(
    sent: np.ndarray, start: np.ndarray, grown: bool, tol: float
) -> np.ndarray | None:
    """The requests whose admission the replay knows (None: all of them). An engine
    that allocates KV as tokens are made (vLLM) admits a prompt when its blocks fit
    and preempts later; the replay, which reserves each request's tokens at
    admission, only approximates when those that waited got in. Those that did not
    wait were admitted when sent: the first-token fit takes them alone, when there
    are 10 or more."""
    if not grown:
        return None
    use = start - sent <= tol
    return use if np.count_nonzero(use) >= 10 else None


def _near_preemption(d: RunData, idx: np.ndarray) -> np.ndarray:
    """Requests of ``idx`` whose decode span met a preemption (the engine's counter rose
    between two scrapes the span overlaps)."""
    if d.pre_t.size < 2:
        return np.zeros(idx.size, dtype=bool)
    rose = np.flatnonzero(np.diff(d.pre_n) > 0)
    lo, hi = d.pre_t[rose], d.pre_t[rose + 1]
    first, last = d.first[idx], d.last[idx]
    return np.asarray(
        ((first[:, None] < hi[None, :]) & (last[:, None] > lo[None, :])).any(axis=1), dtype=bool
    )


def fit_model(d: RunData, levels: list[str] | None = None) -> ServerModel:
    """Fit the model to the requests of ``levels`` (default: every level where the
    load generator was not the limit; see ``LevelData.at_ceiling``). Raises ValueError
    when too few requests answered."""
    usable = [lv for lv in d.levels if not lv.at_ceiling]
    names = set(levels) if levels is not None else {lv.name for lv in usable}
    left_out = {
        lv.name: "client-limited: the load generator, not the server, set its pace"
        for lv in d.levels
        if lv.at_ceiling and lv.name not in names
    }
    use = d.subset(names)
    use = use[np.isfinite(d.sent[use])]
    if use.size < 4:
        raise ValueError("fewer than 4 requests to fit")
    ok = d.ok[use] & np.isfinite(d.first[use]) & np.isfinite(d.end[use])
    errors = float(np.count_nonzero(~d.ok[use])) / use.size
    slots = find_slots(d, use[ok])
    okidx = use[ok]
    per_level = level_slots(d, okidx)
    start = reconstruct(
        d.sent[okidx],
        d.end[okidx],
        per_level if per_level is not None else slots.value,
        first=d.first[okidx],
    )
    kv, kv_mode = fit_kv(d, okidx, start)
    notes: list[str] = []
    kv_full = kv is not None and float(np.max(d.kv_u)) >= 0.9
    if kv_full and slots.source == "fitted":
        # KV filled where the limit showed: the limit is KV's, the slots lie beyond it
        notes.append(
            f"the admission limit of about {slots.value:.0f} came with KV usage "
            f"≥ 90%: KV binds there, the slot limit is above it"
        )
        slots = Slots(None, slots.low, None, "not reached")
    if kv is not None and kv_full:
        # requests that waited for KV room were not running: replay the KV admission,
        # within the slots where they are known (stated or exported: a run whose
        # admissions were replayed against the slots alone put every KV wait into the
        # first token, 2.5 ms a prompt token where vLLM takes 1.3)
        need = np.ceil(kv_need(d, okidx) / d.kv_block) * d.kv_block  # whole blocks
        cap = per_level if per_level is not None else slots.value
        start = reconstruct(d.sent[okidx], d.end[okidx], cap, need, kv.value, first=d.first[okidx])
    rng = np.random.default_rng(0)
    dec = (d.output[okidx] >= 2) & np.isfinite(d.last[okidx]) & (d.last[okidx] > d.first[okidx])
    # a preemption stalls the answers beside it (its victim waits, then its prompt and
    # tokens are prefilled again): spans that met one would lend the step their stalls,
    # read as growth with the running count, where the run has spans that met none
    calm = dec & ~_near_preemption(d, okidx)
    if np.count_nonzero(calm) >= max(3, MIN_CALM_SHARE * np.count_nonzero(dec)):
        dec = calm
    pick = _sample(rng, np.flatnonzero(dec))
    if pick.size < 3:
        raise ValueError("fewer than 3 answers with two tokens or more")
    feats = decode_features(
        start, d.end[okidx], d.first[okidx], d.last[okidx], d.output[okidx], d.prompt[okidx], pick
    )
    (a, b, c, k), cov, (k_lo, k_hi) = _decode_fit(feats)
    # prompts of one step get first tokens stamped within the client's jitter: half a
    # decode step apart at most
    tol = 0.5 * float(np.median(feats.span / feats.steps))
    ends, firsts = d.end[okidx], d.first[okidx]
    ft = fit_first_token(
        start,
        ends,
        firsts,
        d.prompt[okidx],
        (a, b, k),
        tol,
        _sure_admissions(d.sent[okidx], start, kv_full and kv_mode == "grow", tol),
    )
    sd = np.sqrt(np.clip(np.diag(cov), 0.0, None))
    think: dict[str, float] = {}
    for lv in d.levels:
        if lv.closed and lv.name in names and lv.figures.get("throughput"):
            ii = lv.idx[d.ok[lv.idx] & np.isfinite(d.end[lv.idx])]
            resp = float(np.mean(d.end[ii] - d.sent[ii])) if ii.size else 0.0
            # clients that send again at once think for 0 s: a short level's drain
            # lowers its throughput, and would read as think time
            think[lv.name] = (
                0.0
                if d.no_think
                else max(
                    0.0, float(lv.concurrency or 0) / float(lv.figures["throughput"] or 1) - resp
                )
            )
    limited = [lv for lv in d.levels if lv.at_ceiling and lv.rate]
    ceiling = max((lv.figures.get("throughput") or 0.0 for lv in limited), default=None) or None
    clients = [lv.concurrency for lv in d.levels if lv.closed and lv.name in names]
    rates = [lv.rate for lv in d.levels if lv.rate and lv.name in names]
    measured = {
        "n": float(feats.counts.max()) if feats.counts.size else 0.0,
        "p": float(np.nanmax(d.prompt[okidx])) if np.isfinite(d.prompt[okidx]).any() else 0.0,
    }
    if clients:
        measured["clients"] = float(max(c for c in clients if c))
    if rates:
        measured["rate"] = float(max(r for r in rates if r))
    if d.max_tokens is not None:
        measured["max_tokens"] = d.max_tokens
    return ServerModel(
        slots=Param(
            value=slots.value, low=slots.low, high=slots.high, unit="slots", source=slots.source
        ),
        kv_tokens=kv,
        kv_mode=kv_mode,
        kv_block=d.kv_block,
        a=estimate(a, float(sd[0]), "s"),
        b=estimate(b, float(sd[1]), "s per sequence"),
        k=Param(value=k, low=k_lo, high=k_hi, unit="sequences"),
        c=estimate(c, float(sd[2]), "s per prompt token"),
        e=ft.e,
        kappa=ft.kappa,
        c_first=ft.c_first,
        prefill_mode=ft.mode,
        error_share=errors,
        think=think,
        client_ceiling=ceiling,
        measured=measured,
        levels=sorted(names, key=[lv.name for lv in d.levels].index),
        left_out=left_out,
        requests=int(use.size),
        notes=notes,
    )
