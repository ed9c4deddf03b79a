"""One verdict as HTML: title, summary, evidence table and fixes.

The evidence table keeps to three narrow columns (what, value with its unit, source)
so it fits an 800 px window without scrolling sideways; a value that is a sentence (a
note, a reason, an example error) is written on a full-width row under its name,
where it wraps. Text in backticks (`--parallel 16`) is shown as code.
"""

from __future__ import annotations

import math
import re
from html import escape
from typing import Any

from infersight.core.verdicts import Evidence, Verdict
from infersight.report.svg.axes import fmt_value

__all__ = ["ev_value", "evidence_value_text", "inline_html", "verdict_box"]

#: Verdicts drawn with the "bad" (red) border.
_BAD_VERDICTS = ("client_limited", "memory_pressure", "error_driven", "overloaded")
#: A text value longer than this is a sentence: it gets a full-width row of its own.
LONG_VALUE = 28
#: Units that name counted things: one of them is singular.
_COUNTED = ("requests", "sequences", "slots", "tokens", "replicas", "errors")
_CODE = re.compile(r"`([^`\n]+)`")


def inline_html(text: str) -> str:
    """``text`` escaped for HTML, with `backticked` spans as ``<code>``.

    Escaping comes first, so nothing in ``text`` can open a tag; the backticks
    themselves are not HTML-special and survive it.
    """
    return _CODE.sub(r"<code>\1</code>", escape(text))


def ev_value(v: Any) -> str:
    """An evidence value as text: floats to 4 significant digits, None as n/a."""
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e6 else f"{v:,.0f}"
    return "n/a" if v is None else str(v)


def evidence_value_text(e: Evidence) -> str:
    """A value with its unit as people read it: seconds as ms/s, fractions as %."""
    v = e.value
    if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v):
        if e.unit == "s":
            return fmt_value(float(v), "s")
        if e.unit.startswith("fraction"):  # "fraction", "fraction of its threads"
            return f"{v * 100:.3g}%{e.unit.removeprefix('fraction')}"
        if e.unit.startswith("%"):  # "%", "% of a core"
            return f"{v:.3g}{e.unit}"
        if e.unit in ("x", "×"):
            return f"{v:.3g}×"
    text = ev_value(v)
    unit = e.unit[:-1] if v == 1 and e.unit in _COUNTED else e.unit  # "1 request"
    return f"{text} {unit}" if unit else text


def _evidence_rows(evidence: list[Evidence]) -> str:
    rows = []
    for e in evidence:
        value = evidence_value_text(e)
        key = escape(e.key, quote=True)
        if isinstance(e.value, str) and len(value) > LONG_VALUE:
            rows.append(
                f'<tr class="ev-note" data-key="{key}"><td colspan="3">'
                f'<span class="ev-name">{escape(e.name)}</span> '
                f'<span class="ev-val">{inline_html(value)}</span>'
                f' <span class="ev-src muted">({escape(e.source)})</span></td></tr>'
            )
            continue
        rows.append(
            f'<tr data-key="{key}"><td class="ev-name">{escape(e.name)}</td>'
            f'<td class="ev-val num">{escape(value)}</td>'
            f'<td class="ev-src muted">{escape(e.source)}</td></tr>'
        )
    return "".join(rows)


def verdict_box(v: Verdict, where: str) -> str:
    """One verdict: title, id, confidence, ``where`` (its window), summary, evidence, fixes."""
    cls = "ok" if v.id == "healthy" else "bad" if v.id in _BAD_VERDICTS else ""
    rows = _evidence_rows(v.evidence)
    table = (
        '<table class="ev"><colgroup><col class="c-name"><col class="c-val"><col class="c-src">'
        "</colgroup><thead><tr><th>evidence</th><th>value</th><th>source</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
        if rows
        else ""
    )
    fixes = "".join(f"<li>{inline_html(f)}</li>" for f in v.fixes)
    return (
        f'<div class="verdict {cls}"><h3>{escape(v.title or v.id)} '
        f'<span class="tag">{escape(v.id)}</span> <span class="muted">confidence '
        f"{v.confidence * 100:.0f}% · {escape(where)}</span></h3>"
        f"<p>{inline_html(v.summary)}</p>{table}"
        + (f"<p><b>Fix</b></p><ul>{fixes}</ul>" if fixes else "")
        + "</div>"
    )
