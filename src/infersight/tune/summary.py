"""The answer of a tune run in one sentence, and what it rests on."""

from __future__ import annotations

from collections.abc import Mapping

from infersight.core.tune_result import TrialRecord, TuneResult
from infersight.stats.significance import MetricCall

__all__ = ["setting_text", "summarize"]


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
    return ", ".join(
        f"{k} < {v * 1000:g} ms" if v < 1 else f"{k} < {v:g} s" for k, v in slo.items()
    )


def _closest(result: TuneResult) -> TrialRecord | None:
    ok = [t for t in result.trials if t.status == "ok" and t.slo_margin is not None]
    return min(ok, key=lambda t: t.slo_margin or 0.0) if ok else None


def _slo_state(result: TuneResult) -> None:
    """``slo_met`` from the chosen setting's confirmation run; the closest trial when
    nothing is chosen."""
    if not result.slo:
        return
    confirmation = result.trial(result.confirmed_by)
    if confirmation is not None:
        result.slo_met = bool(confirmation.slo_met)
    elif result.chosen is None:
        result.slo_met = False
        closest = _closest(result)
        result.closest_trial = closest.index if closest else None
    else:
        result.slo_met = None  # chosen, but the run stopped before confirming it


def _none_chosen(result: TuneResult) -> str:
    refuted = [result.trial(t.confirms) for t in result.trials if t.confirmed is False]
    named = ", ".join(setting_text(t.setting, result.knob) for t in refuted if t is not None)
    if result.slo:
        closest = result.trial(result.closest_trial)
        near = (
            (
                f"; the closest is {setting_text(closest.setting, result.knob)} (worst check "
                f"at {(closest.slo_margin or 0) * 100:.0f}% of its limit)"
            )
            if closest
            else ""
        )
        if named:
            return (
                f"no setting met the SLO ({_slo_text(result.slo)}) in its confirmation run: "
                f"{named} met it once, not again{near}"
            )
        return f"no setting met the SLO ({_slo_text(result.slo)}){near}"
    if named:
        return f"no setting held its throughput in its confirmation run ({named} did not)"
    return "no setting was measured beyond the baseline"


def _confirmed_text(result: TuneResult) -> str:
    confirmation = result.trial(result.confirmed_by)
    if confirmation is None:
        return "; not confirmed: the run stopped before its confirmation run"
    which = "the A/A run" if confirmation.role == "a/a" else "a run of its own"
    if result.slo:
        return (
            f"; the SLO was met by the chosen setting's confirmation run ({which}, "
            f"trial {confirmation.index})"
        )
    return f"; confirmed by {which} (trial {confirmation.index})"


def summarize(result: TuneResult, delta: float) -> None:
    """Fill ``verdict``, ``slo_met``, ``closest_trial`` and ``summary``."""
    knob, unit = result.knob, "req/s"
    what = "goodput" if result.objective == "goodput" else "throughput"
    base = result.trial(1)
    floor = f"the noise floor of {delta:.1%}"
    _slo_state(result)
    if base is None or base.status != "ok":
        why = f": {base.error_message}" if base is not None and base.error_message else ""
        result.summary = f"the baseline ({setting_text(result.baseline)}) did not run{why}"
        return
    call = objective_call(result)
    result.verdict = call.call if call is not None else None
    chosen = result.trial(result.chosen_trial)
    if result.stopped in ("nothing to tune", "too noisy"):
        result.summary = f"{result.stopped}: " + "; ".join(result.notes)
    elif result.chosen is None or chosen is None:
        result.summary = _none_chosen(result)
    elif result.chosen == result.baseline:
        tried = len({tuple(sorted(t.setting.items())) for t in result.trials})
        result.summary = (
            f"keep {setting_text(result.baseline, knob)}: none of the {tried} settings tried "
            f"was better beyond {floor}" + _confirmed_text(result)
        )
    else:
        after = f"{chosen.objective:.3g}" if chosen.objective is not None else "-"
        change = f"{setting_text(result.baseline, knob)} -> {setting_text(result.chosen, knob)}"
        if result.objective == "goodput" and not base.objective:
            # No ratio to a baseline with no goodput: say what it was.
            result.summary = (
                f"{change}: goodput {after} {unit}, where none of the baseline's "
                "requests met the SLO"
            )
        elif result.objective == "goodput" and base.slo_met is False:
            # A ratio to the few requests that met an SLO the baseline missed says little.
            result.summary = (
                f"{change}: goodput {after} {unit}, where the baseline missed "
                f"the SLO ({base.objective:.3g} {unit} of its requests met it)"
            )
        else:
            before = f"{base.objective:.3g}" if base.objective is not None else "-"
            ratio = f" (x{call.interval_text()})" if call is not None else ""
            verdict = call.call if call is not None else "not re-run"
            result.summary = (
                f"{change}: {what} {before} -> {after} {unit}{ratio}: {verdict}, against {floor}"
            )
        result.summary += _confirmed_text(result)
    if chosen is not None and result.knob and result.values and result.chosen:
        edge = result.chosen.get(result.knob)
        if edge == result.values[-1] and edge != result.baseline.get(result.knob):
            result.notes.append(
                f"the choice is the largest {result.knob} searched ({edge}): "
                "a wider range (--values) may do better still"
            )
    if result.stopped in ("budget", "interrupted"):
        result.summary += f" (stopped early: {result.stopped}; {len(result.trials)} trials done)"
