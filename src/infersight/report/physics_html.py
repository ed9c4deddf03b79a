"""``environment.physics`` (the device, model and floors the diagnosis used) as a small
table, folded under the run's identity: people open it when a floor looks wrong."""

from __future__ import annotations

import json
from collections.abc import Mapping
from html import escape
from typing import Any

from infersight.core.numbers import as_float
from infersight.report.svg.axes import fmt_value

__all__ = ["physics_html"]

#: Per-level floor fields: (key, column heading, unit for fmt_value).
_FLOOR_COLUMNS = (
    ("itl_floor_s", "ITL floor", "s"),
    ("itl_floor_bandwidth_s", "bandwidth floor", "s"),
    ("itl_floor_compute_s", "compute floor", "s"),
    ("ttft_floor_s", "TTFT floor", "s"),
    ("batch", "batch", ""),
    ("context_tokens", "context tokens", ""),
    ("prompt_tokens", "prompt tokens", ""),
)


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, str):
        return v
    n = as_float(v)
    if n is not None:
        return f"{n:.4g}" if not n.is_integer() else f"{n:,.0f}"
    return json.dumps(v, default=str)


def _flops(flops: Mapping[str, Any]) -> str:
    """``208 GFLOP/s (bf16, fp16, fp32)``: equal peaks are listed once."""
    by_value: dict[float, list[str]] = {}
    for dtype, v in flops.items():
        n = as_float(v)
        if n is not None:
            by_value.setdefault(n, []).append(str(dtype))
    return "; ".join(f"{_si(v)}FLOP/s ({', '.join(d)})" for v, d in by_value.items())


def _si(v: float) -> str:
    """``208 G``, ``1.98 P``: a number with its SI prefix, for a unit to follow."""
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M")):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {prefix}"
    return f"{v:.3g} "


def _device_rows(dev: Mapping[str, Any]) -> list[tuple[str, str]]:
    rows = [("device", _text(dev.get("name") or dev.get("key") or "unknown"))]
    mem, bw = as_float(dev.get("memory_bytes")), as_float(dev.get("bandwidth"))
    if mem is not None:
        rows.append(("memory", f"{mem / 2**30:.1f} GiB"))
    if bw is not None:
        rows.append(("memory bandwidth", f"{bw / 1e9:.3g} GB/s"))
    if isinstance(dev.get("flops"), Mapping):
        rows.append(("peak compute", _flops(dev["flops"])))
    if dev.get("source"):
        rows.append(("peaks from", _text(dev["source"])))
    shown = {"name", "key", "memory_bytes", "bandwidth", "flops", "source"}
    rest = [f"{k} {_text(v)}" for k, v in dev.items() if k not in shown and v is not None]
    if rest:
        rows.append(("device facts", " · ".join(rest)))
    return rows


def _floors_table(floors: Mapping[str, Any]) -> str:
    levels = [(str(k), v) for k, v in floors.items() if isinstance(v, Mapping)]
    if not levels:
        return ""
    cols = [c for c in _FLOOR_COLUMNS if any(c[0] in f for _, f in levels)]
    head = "".join(f"<th>{escape(h)}</th>" for _, h, _ in cols)
    body = []
    for name, f in levels:
        cells = []
        for key, _, unit in cols:
            n = as_float(f.get(key))
            cells.append(
                f"<td class=num>{escape(fmt_value(n, unit) if n is not None else '-')}</td>"
            )
        body.append(f"<tr><td>{escape(name)}</td>{''.join(cells)}</tr>")
    sources = {str(f.get("source")) for _, f in levels if f.get("source")}
    note = "".join(f'<p class="muted">{escape(s)}</p>' for s in sorted(sources))
    return (
        f'<div class="wide"><table><tr><th>level</th>{head}</tr>{"".join(body)}</table></div>{note}'
    )


def physics_html(physics: Mapping[str, Any]) -> str:
    """The physics as a folded ``<details>``: device, model, then the floors per level."""
    rows: list[tuple[str, str]] = []
    dev = physics.get("device")
    if isinstance(dev, Mapping):
        rows += _device_rows(dev)
    for key, value in physics.items():
        if key in ("device", "floors") or value is None:
            continue
        rows.append((key.replace("_", " "), _text(value)))
    table = "".join(f"<tr><td>{escape(k)}</td><td>{escape(v)}</td></tr>" for k, v in rows)
    floors = physics.get("floors")
    floors_part = _floors_table(floors) if isinstance(floors, Mapping) else ""
    return (
        '<details class="physics"><summary>Physics the diagnosis used (device, model, '
        f"floors)</summary><table class=kv>{table}</table>{floors_part}</details>"
    )
