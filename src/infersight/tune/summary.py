"""The answer of a tune run in one sentence, and what it rests on."""

from __future__ import annotations

from collections.abc import Mapping

from infersight.core.significance import MetricCall
from infersight.core.tune_result import TrialRecord, TuneResult

__all__ = ["objective_call", "setting_text", "summarize"]


def setting_text(setting: Mapping[str, int] | None, knob: str | None = None) -> str:
    """``slots 8`` (the searched knob only), or every knob: ``slots 8, threads 2``."""
    if not setting:
        return "-"
    if knob is not None and knob in setting:
        return f"{knob} {setting[knob]}"
    return ", ".join(f"{k} {v}" for k, v in sorted(setting.items()))


def objective_call(result: TuneResult) -> MetricCall | None:
    """The before/after call of the objective (goodput or throughput)."""
    return next((c for c in result.before_after if c.metric == result.objective), None)


def _slo_text(slo: Mapping[str, float]) -> str:
    return ", ".join(f"{k} < {v * 1000:g} ms" if v < 1 else f"{k} < {v:g} s" for k, v in slo.items())


def _closest(result: TuneResult) -> TrialRecord | None:
    ok = [t for t in result.trials if t.status == "ok" and t.slo_margin is not None]
    return min(ok, key=lambda t: t.slo_margin or 0.0) if ok else None


def summarize(result: TuneResult, delta: float) -> None:
    """Fill ``verdict``, ``slo_met``, ``closest_trial`` and ``summary``."""
    knob, unit = result.knob, "req/s"
    what = "goodput" if result.objective == "goodput" else "throughput"
    base = result.trial(1)
    floor = f"the noise floor of {delta:.1%}"
    if result.slo:
        result.slo_met = any(t.slo_met for t in result.trials if t.status == "ok")
        if not result.slo_met:
            closest = _closest(result)
            result.closest_trial = closest.index if closest else None
    if base is None or base.status != "ok":
        why = f": {base.error_message}" if base is not None and base.error_message else ""
        result.summary = f"the baseline ({setting_text(result.baseline)}) did not run{why}"
        return
    call = objective_call(result)
    result.verdict = call.call if call is not None else None
    chosen = result.trial(result.chosen_trial)
    if result.stopped in ("nothing to tune", "too noisy"):
        result.summary = f"{result.stopped}: " + "; ".join(result.notes)
    elif result.slo and not result.slo_met:
        closest = result.trial(result.closest_trial)
        near = (f"; the closest is {setting_text(closest.setting, knob)} (worst check at "
                f"{(closest.slo_margin or 0) * 100:.0f}% of its limit)") if closest else ""
        result.summary = f"no setting met the SLO ({_slo_text(result.slo)}){near}"
    elif chosen is None:
        result.summary = "no setting was measured beyond the baseline"
    elif result.chosen == result.baseline:
        tried = len({tuple(sorted(t.setting.items())) for t in result.trials})
        result.summary = (
            f"keep {setting_text(result.baseline, knob)}: none of the {tried} settings tried "
            f"was better beyond {floor}"
        )
    else:
        before = f"{base.objective:.3g}" if base.objective is not None else "-"
        after = f"{chosen.objective:.3g}" if chosen.objective is not None else "-"
        change = f"{setting_text(result.baseline, knob)} -> {setting_text(result.chosen, knob)}"
        ratio = f" (x{call.interval_text()})" if call is not None else ""
        verdict = call.call if call is not None else "not re-run"
        result.summary = (
            f"{change}: {what} {before} -> {after} {unit}{ratio}: {verdict}, against {floor}"
        )
    if chosen is not None and result.knob and result.values and result.chosen:
        edge = result.chosen.get(result.knob)
        if edge == result.values[-1] and edge != result.baseline.get(result.knob):
            result.notes.append(f"the choice is the largest {result.knob} searched ({edge}): "
                                "a wider range (--values) may do better still")
    if result.stopped in ("budget", "interrupted"):
        result.summary += f" (stopped early: {result.stopped}; {len(result.trials)} trials done)"
