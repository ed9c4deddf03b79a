"""The fitted model of the server and its self-check, as every output shows them
(docs/design.md section 9): one line for the model, one for the held-out error per
level and overall, and, when the model is not trusted beyond what was measured, why."""

from __future__ import annotations

from html import escape

from infersight.core.records import RunResult
from infersight.core.server_model import (
    CHECKED_METRICS,
    UNCOUNTED,
    Fix,
    SelfCheck,
    ServerModel,
)
from infersight.report.svg.axes import fmt_value

__all__ = ["check_text", "fix_text", "model_html", "model_lines", "model_text"]

_NAMES = {"throughput": "throughput", "ttft_p50": "TTFT p50", "tpot_p50": "TPOT p50"}


def model_text(m: ServerModel) -> str:
    """ "slots 4 (fitted); step 10 ms, +0.2 ms per sequence past 4; ..."."""
    step = f"step {fmt_value(m.a.value or 0.0, 's')}"
    if m.b.value:
        step += f", +{fmt_value(m.b.value, 's')} per sequence past {m.k.value or 0:.0f}"
    else:
        step += f", flat up to {m.measured.get('n', 0):.0f} running"
    parts = [f"slots {m.slots.text()} ({m.slots.source})", step]
    if m.c.value:
        parts.append(f"prefill {fmt_value(m.c.value * 1000, 's')} per 1k prompt tokens")
    if m.prefill_mode == "batched":
        first = fmt_value((m.c_first.value or 0.0) * 1000, "s")
        parts.append(f"prompts admitted together share one prefill step ({first} per 1k)")
    if m.kv_tokens is not None:
        how = "reserved at admission" if m.kv_mode == "reserve" else "on demand, as tokens are made"
        parts.append(f"KV {m.kv_tokens.text()} ({how})")
    if m.error_share:
        parts.append(f"errors {m.error_share:.1%}")
    parts.append(f"fitted on {len(m.levels)} level(s), {m.requests} requests")
    return "; ".join(parts)


def check_text(sc: SelfCheck) -> str:
    """ "leave-one-level-out: throughput 4%, TTFT p50 9%, TPOT p50 2% (c=1: ...)"."""
    if sc.method == "none":
        return sc.why_not
    overall = ", ".join(
        f"{_NAMES[k]} {sc.mape[k]:.0%}" for k in CHECKED_METRICS if sc.mape.get(k) is not None
    )
    per = "; ".join(
        f"{c.level}{'' if c.counted else f' ({UNCOUNTED})'}: "
        + ", ".join(
            f"{_NAMES[k]} {c.error[k]:.0%}" for k in CHECKED_METRICS if c.error.get(k) is not None
        )
        for c in sc.levels
    )
    return f"{sc.method} MAPE {overall or 'n/a'}" + (f" ({per})" if per else "")


def fix_text(fix: Fix, limiter: str | None) -> str:
    """ "limiter slots; slots 4 → 8: throughput 21.7 req/s, TTFT p50 31 ms (estimate,
    error 33%)"."""
    p = fix.predicted
    figs = ", ".join(
        f"{name} {fmt_value(v, unit) if unit else format(v, '.3g') + ' req/s'}"
        for name, v, unit in (
            ("throughput", p.throughput, ""),
            ("TTFT p50", p.ttft_p50, "s"),
            ("TTFT p99", p.ttft_p99, "s"),
            ("TPOT p50", p.tpot_p50, "s"),
        )
        if v is not None
    )
    if fix.knob is None:
        act = "no change"
    else:

        def num(v: float | None) -> str:
            return "?" if v is None else f"{v:.4g}"

        act = f"{fix.knob} {num(fix.from_value)} \u2192 {num(fix.to_value)}"
    err = f", held-out error {fix.error:.0%}" if fix.error is not None else ""
    return f"limiter {limiter or 'unknown'}; {act}: {figs or 'no prediction'} ({fix.basis}{err})"


def model_lines(result: RunResult) -> list[tuple[str, str]]:
    """(label, text) pairs for the model, its self-check and what it cannot support."""
    out: list[tuple[str, str]] = []
    if result.server_model is not None:
        out.append(("model", model_text(result.server_model)))
    rec = result.recommendation
    if rec is not None and rec.fix is not None and rec.fix.knob != rec.knob:
        # the recommendation's numbers are the model's own; said once
        out.append(("the model's fix", fix_text(rec.fix, rec.limiter)))
    sc = result.self_check
    if sc is not None:
        out.append(("self-check", check_text(sc)))
        if not sc.trusted and sc.why_not:
            out.append(("no number beyond the measured range", sc.why_not))
    return out


def _cell(v: float | None, metric: str) -> str:
    if v is None:
        return "-"
    return f"{v:.3g} req/s" if metric == "throughput" else fmt_value(v, "s")


def model_html(result: RunResult) -> str:
    """The model's parameters (value, 95% interval, where from) and its self-check per
    level: measured, predicted and the error, for the HTML report."""
    m, sc = result.server_model, result.self_check
    if m is None:
        return '<p class="muted">No model of the server: the run has no requests to fit.</p>'
    rows = [
        ("slots S", m.slots),
        ("step a", m.a),
        ("growth b past k", m.b),
        ("k", m.k),
        ("prefill c (per token, in a step)", m.c),
        ("first token e", m.e),
        ("first token κ (steps)", m.kappa),
        (
            "first token c_first (per batch token)"
            if m.prefill_mode == "batched"
            else "first token c_first (per token)",
            m.c_first,
        ),
    ]
    if m.kv_tokens is not None:
        rows.insert(1, ("KV capacity", m.kv_tokens))
    params = "".join(
        f"<tr><td>{escape(name)}</td><td class=num>{escape(p.text())}</td>"
        f"<td>{escape(p.source)}</td></tr>"
        for name, p in rows
    )
    out = (
        f"<p>{escape(model_text(m))}</p><table class=kv><tr><th>parameter</th><th>value "
        f"(95% interval)</th><th>from</th></tr>{params}</table>"
    )
    if sc is None:
        return out
    head = "".join(
        f"<th>{escape(_NAMES[k])} measured / predicted / error</th>" for k in CHECKED_METRICS
    )
    body = "".join(
        f"<tr><td>{escape(c.level + ('' if c.counted else f' ({UNCOUNTED})'))}</td>"
        + "".join(
            f"<td class=num>{escape(_cell(c.measured.get(k), k))} / "
            f"{escape(_cell(c.predicted.get(k), k))} / "
            f"{'-' if c.error.get(k) is None else format(c.error[k], '.0%')}</td>"
            for k in CHECKED_METRICS
        )
        + "</tr>"
        for c in sc.levels
    )
    mape = "".join(
        f"<td class=num>{'-' if sc.mape.get(k) is None else format(sc.mape[k], '.0%')}</td>"
        for k in CHECKED_METRICS
    )
    verdict = (
        "trusted within 15%: its numbers may go up to 2× beyond what was measured"
        if sc.trusted
        else f"not trusted beyond what was measured: {sc.why_not}"
    )
    return (
        out + f"<h3>Self-check ({escape(sc.method)})</h3><p>{escape(verdict)}</p>"
        f'<div class="wide"><table><tr><th>level</th>{head}</tr>{body}'
        f"<tr><th>MAPE</th>{mape}</tr></table></div>"
    )
