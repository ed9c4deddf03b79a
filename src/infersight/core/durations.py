"""Durations as people type them: ``500ms``, ``2s``, ``1.5m``, ``1h30m``, ``2d`` or bare
seconds (Prometheus' duration syntax is a subset).

Every flag or setting that takes a time accepts this one syntax (latency limits,
timeouts, intervals, run lengths), so ``--ttft-slo 500ms`` and ``--timeout 10m`` read
the same in every command.
"""

from __future__ import annotations

import math
import re

from infersight.core.errors import ConfigError

__all__ = ["UNITS", "format_duration", "format_elapsed", "parse_duration"]

#: Seconds per unit. ``m`` is minutes (a duration never means metres here).
UNITS = {
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "min": 60.0,
    "h": 3600.0,
    "d": 86400.0,
    "w": 604800.0,
    "y": 31536000.0,
}

_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-zµ]*)\s*$", re.IGNORECASE)
# Compound forms as Prometheus writes them (1h30m, 2d12h): whole parts, largest first.
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|us|µs|min|s|m|h|d|w|y)", re.IGNORECASE)


def parse_duration(text: str | float, what: str = "duration", *, bare: str = "s") -> float:
    """Seconds from ``text``; a bare number is in ``bare`` units (seconds by default).

    ``what`` names the flag in the one-line error (``--ttft-slo 'abc': expected ...``).
    Negative, infinite and NaN values are refused; zero is allowed (``--grace 0``).
    """
    if isinstance(text, int | float) and not isinstance(text, bool):
        value, unit = float(text), bare
    else:
        m = _RE.match(str(text))
        if m is not None and (not m.group(2) or m.group(2).lower() in UNITS):
            value, unit = float(m.group(1)), (m.group(2) or bare).lower()
        else:
            value, unit = _compound(str(text), what, bare), "s"
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"{what} {text!r}: a duration must be a finite number >= 0")
    return value * UNITS[unit]


def _compound(text: str, what: str, bare: str) -> float:
    s, pos, total = text.strip(), 0, 0.0
    for m in _PART.finditer(s):
        if m.start() != pos:
            break
        total += float(m.group(1)) * UNITS[m.group(2).lower()]
        pos = m.end()
    if pos == 0 or pos != len(s):
        raise ConfigError(
            f"{what} {text!r}: expected a duration like 500ms, 2s, 1.5m, 1h30m or "
            f"a bare number of {_unit_name(bare)}"
        )
    return total


def format_duration(seconds: float) -> str:
    """The shortest exact-enough text for ``seconds``: ``500ms``, ``2s``, ``1.5m``."""
    if seconds < 1.0:
        return f"{seconds * 1e3:.4g}ms"
    if seconds < 120.0:
        return f"{seconds:.4g}s"
    if seconds < 7200.0:
        return f"{seconds / 60.0:.4g}m"
    return f"{seconds / 3600.0:.4g}h"


def format_elapsed(seconds: float) -> str:
    """A span as a clock reads it, to the second: ``45s``, ``12m05s``, ``3h07m``."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


def _unit_name(unit: str) -> str:
    return {"s": "seconds", "ms": "milliseconds"}.get(unit, unit)
