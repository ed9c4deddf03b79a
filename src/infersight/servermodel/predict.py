"""``predict``: the model of a saved run evaluated at other knobs or loads
(docs/design.md section 9), each figure with the error the model measured on the run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from infersight.core.errors import ConfigError
from infersight.core.records import RunResult
from infersight.core.server_model import CHECKED_METRICS, Prediction, SelfCheck, ServerModel
from infersight.servermodel.bounds import beyond_measured, saturated_text
from infersight.servermodel.checked import checked_on, held_knobs
from infersight.servermodel.data import RunData, run_data
from infersight.servermodel.evaluate import level_workload, predict_load
from infersight.servermodel.fit import fit_model
from infersight.servermodel.selfcheck import self_check

__all__ = ["Forecast", "forecast"]


@dataclass(slots=True)
class Forecast:
    """A prediction, the setting it is for, the model's error and its caveats."""

    setting: dict[str, float | int | None]
    prediction: Prediction
    error: dict[str, float | None]
    basis: str
    notes: list[str] = field(default_factory=list)
    #: Past the most sequences the run had running: the same setting if the step time
    #: grew in proportion to the running count from there (the low end of the range).
    if_saturated: Prediction | None = None
    #: Past the measured top: the same setting if the step time stayed what it was
    #: there (every further sequence free: the high end of the range).
    if_flat: Prediction | None = None
    #: What the errors were checked on: levels and the knobs they varied, or "not
    #: checked" and why (a what-if on a knob the run held at one value).
    checked_on: str = ""
    #: Where not checked or past the measured top: each figure's range, from compute
    #: saturating at the measured top to the step time staying flat there, each end
    #: widened by the model's held-out error on that figure.
    ranges: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "setting": self.setting,
            "prediction": self.prediction.model_dump(),
            "error": self.error,
            "basis": self.basis,
            "notes": self.notes,
            "if_saturated": None if self.if_saturated is None else self.if_saturated.model_dump(),
            "if_flat": None if self.if_flat is None else self.if_flat.model_dump(),
            "checked_on": self.checked_on,
            "ranges": {k: list(v) for k, v in self.ranges.items()},
        }


def _positive(name: str, v: float | None) -> None:
    if v is not None and (not math.isfinite(v) or v <= 0):
        raise ConfigError(f"--{name.replace('_', '-')} must be a positive number (got {v:g})")


def _model(result: RunResult, d: RunData) -> tuple[ServerModel, SelfCheck]:
    if result.server_model is not None and result.self_check is not None:
        return result.server_model, result.self_check
    try:
        m = fit_model(d)
    except ValueError as e:
        raise ConfigError(f"the model cannot be fitted to this run: {e}") from None
    return m, self_check(d, m)


def _ranges(
    sc: SelfCheck, *preds: Prediction | None
) -> dict[str, tuple[float | None, float | None]]:
    """Each figure from its lowest to its highest reading; the TTFT median's span
    includes each reading's band (where a measured level's median may fall). Each end
    is itself the model's figure, so it is widened by the model's held-out error on
    that figure (the self-check's): a range never claims more than the fit can."""
    out: dict[str, tuple[float | None, float | None]] = {}
    for k in CHECKED_METRICS:
        vals = [v for p in preds if p is not None and (v := getattr(p, k)) is not None]
        if k == "ttft_p50":
            vals += [b for p in preds if p is not None and p.ttft_p50_band for b in p.ttft_p50_band]
        vals.sort()
        e = sc.mape.get(k) or 0.0
        out[k] = (max(0.0, vals[0] * (1.0 - e)), vals[-1] * (1.0 + e)) if vals else (None, None)
    return out


def forecast(
    result: RunResult,
    *,
    slots: int | None = None,
    rate: float | None = None,
    concurrency: int | None = None,
    replicas: int | None = None,
    max_tokens: int | None = None,
    kv_tokens: float | None = None,
) -> Forecast:
    """The model's figures for ``result`` at the given knobs (the rest as measured at
    the run's most loaded level). Raises ConfigError for a knob it cannot vary."""
    for name, v in (
        ("slots", slots),
        ("rate", rate),
        ("concurrency", concurrency),
        ("replicas", replicas),
        ("max_tokens", max_tokens),
        ("kv_tokens", kv_tokens),
    ):
        _positive(name, float(v) if v is not None else None)
    if rate is not None and concurrency is not None:
        raise ConfigError("give --rate (open loop) or --concurrency (closed loop), not both")
    d = run_data(result)
    if not d.levels:
        raise ConfigError("the run has no load levels to predict from")
    m, sc = _model(result, d)
    notes: list[str] = []
    if slots is not None and m.slots.value is None and m.kv_tokens is not None:
        raise ConfigError(
            "KV, not the slots, limited this run: the model cannot say what "
            "another slot count does (it never saw the slot limit)"
        )
    fitted = [lv for lv in d.levels if lv.name in m.levels] or d.levels
    base = max(fitted, key=lambda lv: (lv.concurrency or 0, lv.rate or 0.0))
    prompt, output = level_workload(d, base)
    if max_tokens is not None:
        output = np.minimum(output, float(max_tokens))
    if rate is None and concurrency is None:
        rate, concurrency = (base.rate, None) if not base.closed else (None, base.concurrency)
    think = m.think.get(base.name, 0.0) if concurrency is not None else 0.0

    def at(saturate: float | None = None, flat: float | None = None) -> Prediction:
        return predict_load(
            m,
            prompt,
            output,
            slots=slots,
            rate=rate,
            concurrency=concurrency,
            think=think,
            replicas=replicas or 1,
            slo=d.slo or None,
            saturate=saturate,
            max_tokens=max_tokens,
            kv=kv_tokens,
            flat=flat,
            band_n=base.idx.size,
        )

    p = at()
    basis = "model" if sc.trusted else "estimate"
    low, note = beyond_measured(m, p, at)
    if note:
        basis = "estimate"
        notes.append(note)
    if not sc.trusted and sc.why_not:
        notes.append(f"not checked within 15%: {sc.why_not}")
    err = {k: sc.mape.get(k) for k in CHECKED_METRICS}
    if kv_tokens is not None and m.kv_tokens is None:
        raise ConfigError(
            "the engine exported no KV usage in this run: the model has no KV capacity to change"
        )
    held = held_knobs(d, max_tokens=max_tokens, replicas=replicas, kv_tokens=kv_tokens)
    told = checked_on(d, m, sc)
    top = m.measured.get("n") or None
    high: Prediction | None = None
    if held:
        # the self-check never saw this knob move: its error says nothing about it
        err = dict.fromkeys(CHECKED_METRICS)
        basis = "estimate"
        told = f"not checked: {' and '.join(held)}; the self-check varied none of them"
        low = low if low is not None else at(top)
    if low is not None and top is not None:
        # the run never saw the step time past its top: it may saturate there (low) or
        # stay flat (high); the measurement can fall anywhere between
        high = at(flat=top)
        notes.append(f"if the step time stays flat past {top:.0f}: {saturated_text(high)}")
    ranges = _ranges(sc, p, low, high) if low is not None else {}
    said = ", ".join(f"{k} {e:.0%}" for k in ranges if (e := sc.mape.get(k) or 0.0) >= 0.005)
    if said:
        notes.append(f"each range's ends widened by the model's held-out error ({said})")
    setting = {
        "slots": slots if slots is not None else m.slots.value,
        "rate": rate,
        "concurrency": concurrency,
        "replicas": replicas or 1,
        "max_tokens": max_tokens,
        "kv_tokens": kv_tokens,
    }
    return Forecast(
        setting=setting,
        prediction=p,
        error=err,
        basis=basis,
        notes=notes,
        if_saturated=low,
        if_flat=high,
        checked_on=told,
        ranges=ranges,
    )
