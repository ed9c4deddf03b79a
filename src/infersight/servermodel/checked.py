"""What a predicted figure's error was checked on (docs/design.md section 9, "Every
error states what it was checked on").

The self-check leaves levels out, so it checks the knobs those levels varied: the
clients or the rate, and with them the running count. A what-if on a knob every level
held at one value (max_tokens, replicas) borrows nothing from it: it is "not checked",
and comes with a range instead, from the same setting with compute saturating at the
measured top (the low end, ``bounds``) to the model's own figure.
"""

from __future__ import annotations

from infersight.core.server_model import SelfCheck, ServerModel
from infersight.servermodel.data import RunData

__all__ = ["checked_on", "held_knobs"]


def checked_on(d: RunData, m: ServerModel, sc: SelfCheck) -> str:
    """The levels the self-check predicted and the knobs they varied, in words."""
    if sc.method == "none" or not sc.levels:
        return "not checked: " + (sc.why_not or "no level to check the model on")
    names = [c.level for c in sc.levels]
    fitted = [lv for lv in d.levels if lv.name in names]
    varied = []
    if len({lv.concurrency for lv in fitted if lv.closed}) > 1:
        varied.append("clients")
    if len({round(lv.rate or 0.0, 6) for lv in fitted if not lv.closed}) > 1:
        varied.append("rate")
    n = m.measured.get("n")
    if n:
        varied.append(f"the running count up to {n:.0f}")
    return f"{sc.method} on {', '.join(names)}, which varied " + (
        " and ".join(varied) if varied else "nothing but their own noise"
    )


def held_knobs(
    d: RunData,
    *,
    max_tokens: int | None = None,
    replicas: int | None = None,
    kv_tokens: float | None = None,
) -> list[str]:
    """The knobs asked for that every level of the run held at one value."""
    out = []
    if kv_tokens is not None:
        out.append("the KV capacity (one value in every level)")
    if max_tokens is not None and (d.max_tokens is None or max_tokens != d.max_tokens):
        had = f"{d.max_tokens:g} in every level" if d.max_tokens else "one value throughout"
        out.append(f"max_tokens (the run had {had})")
    if replicas is not None and replicas > 1:
        out.append("replicas (the run had 1)")
    return out
