"""The first-token part of the model's fit (docs/design.md section 9, step 4).

A request's first token comes ``e + κ·step(n) + c_first·p`` after its admission, with
``step(n)`` the mean step time over its wait and ``p`` its own prompt, or, where the
engine prefills in batches, the prompt tokens prefilled in the step with and ahead of it
(:func:`~infersight.servermodel.features.prefilled_during`). The batched reading is kept
only where the run clearly shows it (``BATCHED_GAIN``, BIC, and the batches' prompts
worth 5% of the mean wait).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import lsq_linear

from infersight.core.server_model import Param
from infersight.servermodel.admission import running_at
from infersight.servermodel.features import prefilled_during, step_time, time_at_counts

__all__ = ["BATCHED_GAIN", "FirstToken", "estimate", "fit_first_token"]

#: Batched prefill is read only where it leaves at most this share of the squared error
#: of each prompt read alone: a clear gain, as a server whose first tokens slow with its
#: load (more running, more admitted together) would otherwise lend the batches its
#: step's growth.
BATCHED_GAIN = 0.85


@dataclass(frozen=True, slots=True)
class FirstToken:
    """The fitted first-token parameters and how prompts were read."""

    e: Param
    kappa: Param
    c_first: Param
    #: "each" (a prompt's own prefill) or "batched" (one step for the prompts together).
    mode: str


def estimate(v: float, sd: float, unit: str, lo_bound: float = 0.0) -> Param:
    """A fitted value with its 95% interval from its standard deviation."""
    sd = sd if math.isfinite(sd) else 0.0
    return Param(value=v, low=max(lo_bound, v - 1.96 * sd), high=v + 1.96 * sd, unit=unit)


def _varies(x: np.ndarray) -> bool:
    """Whether a regressor varies enough to be told from the constant."""
    return x.size > 3 and float(np.std(x)) > 0.02 * max(float(np.mean(np.abs(x))), 1e-12)


def _least_squares(
    big_f: np.ndarray, steps: np.ndarray, p: np.ndarray
) -> tuple[Param, Param, Param, float, int]:
    """``e + κ·step(n) + c_first·p`` by bounded least squares. A regressor that does not
    vary in the run cannot be told from ``e``: κ is then one step (a first token needs
    at least the step that computes it) and ``c_first`` 0, each marked "assumed". The
    last two values are the sum of squared residuals and the parameters fitted."""
    ok = np.isfinite(big_f)
    y, s, pp = big_f[ok], steps[ok], p[ok]
    cols, names = [np.ones(y.size)], ["e"]
    fixed = np.zeros(y.size)
    assumed: dict[str, float] = {}
    if _varies(s):
        cols.append(s)
        names.append("kappa")
    else:
        assumed["kappa"] = 1.0
        fixed += s
    if _varies(pp):
        cols.append(pp)
        names.append("c_first")
    else:
        assumed["c_first"] = 0.0
    design = np.column_stack(cols)
    target = y - fixed
    if float(np.median(target)) < 0 and "kappa" in assumed:
        assumed["kappa"], target = 0.0, y  # the first token came faster than one step
    sol = lsq_linear(design, target, bounds=(np.zeros(len(cols)), np.full(len(cols), np.inf)))
    res = target - design @ sol.x
    s2 = float(np.sum(res**2)) / max(1, y.size - len(cols))
    sd = np.sqrt(np.clip(np.diag(np.linalg.pinv(design.T @ design) * s2), 0.0, None))
    units = {"e": "s", "kappa": "steps", "c_first": "s per prompt token"}
    out = {
        n: estimate(float(v), float(e), units[n]) for n, v, e in zip(names, sol.x, sd, strict=True)
    }
    for n, v in assumed.items():
        out[n] = Param(value=v, low=v, high=v, unit=units[n], source="assumed (no variation)")
    return out["e"], out["kappa"], out["c_first"], float(np.sum(res**2)), len(cols)


def fit_first_token(
    start: np.ndarray,
    end: np.ndarray,
    first: np.ndarray,
    prompt: np.ndarray,
    step: tuple[float, float, float],
    tol: float,
    use: np.ndarray | None = None,
) -> FirstToken:
    """Fit the first tokens of the requests admitted at ``start`` (each request's end,
    first token and prompt tokens beside it) under the step ``(a, b, k)``. ``tol``: how
    far apart the client stamps the first tokens of one step (half a decode step);
    ``use``: the requests whose first tokens are fitted (default: all; every request
    still counts in the batches it was prefilled in)."""
    a, b, k = step
    # the step time a request's first token was computed at: the mean over its wait
    # for it (the running count at its admission alone misreads a handover)
    counts, tau = time_at_counts(start, end, start, first)
    span = tau.sum(axis=1)
    at_admit = step_time(running_at(start, end, start), a, b, k)
    mean_step = np.where(
        span > 0,
        (tau * step_time(counts, a, b, k)[None, :]).sum(axis=1) / np.maximum(span, 1e-12),
        at_admit,
    )
    own = np.nan_to_num(prompt)
    wait = first - start if use is None else np.where(use, first - start, np.nan)
    fitted = int(np.count_nonzero(np.isfinite(wait)))
    e, kappa, c_first, sse_own, n_own = _least_squares(wait, mean_step, own)
    batched = prefilled_during(start, first, own, tol)
    if np.any(batched > own):
        e_b, kappa_b, cf_b, sse_b, n_b = _least_squares(wait, mean_step, batched)
        # better by more than a parameter it adds costs (BIC: a constant prompt leaves
        # the request's own reading one parameter short)
        gain = fitted * math.log(max(sse_own, 1e-12) / max(sse_b, 1e-12))
        # and the batches' prompts must matter: 5% of the mean wait for a first token
        ahead = (cf_b.value or 0.0) * float(np.mean(batched - own))
        if (
            sse_b <= BATCHED_GAIN * sse_own
            and gain > math.log(max(fitted, 2)) * (n_b - n_own)
            and ahead >= 0.05 * float(np.nanmean(wait))
        ):
            return FirstToken(e_b, kappa_b, cf_b, "batched")
    return FirstToken(e, kappa, c_first, "each")
