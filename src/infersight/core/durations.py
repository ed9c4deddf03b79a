"""Durations as people type them: ``500ms``, ``2s``, ``1.5m``, ``1h`` or bare seconds.

Every flag or setting that takes a time accepts this one syntax (latency limits,
timeouts, intervals, run lengths), so ``--ttft-slo 500ms`` and ``--timeout 10m`` read
the same in every command.
"""

from __future__ import annotations

import math
import re

from infersight.core.errors import ConfigError

__all__ = ["UNITS", "format_duration", "parse_duration"]

#: Seconds per unit. ``m`` is minutes (a duration never means metres here).
UNITS = {"us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}

_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-zµ]*)\s*$", re.IGNORECASE)


def parse_duration(text: str | float, what: str = "duration", *, bare: str = "s") -> float:
    """Seconds from ``text``; a bare number is in ``bare`` units (seconds by default).

    ``what`` names the flag in the one-line error (``--ttft-slo 'abc': expected ...``).
    Negative, infinite and NaN values are refused; zero is allowed (``--grace 0``).
    """
    if isinstance(text, int | float) and not isinstance(text, bool):
        value, unit = float(text), bare
    else:
        m = _RE.match(str(text))
        if m is None or (m.group(2) and m.group(2).lower() not in UNITS):
            raise ConfigError(
                f"{what} {str(text)!r}: expected a duration like 500ms, 2s, 1.5m or "
                f"a bare number of {_unit_name(bare)}"
            )
        value, unit = float(m.group(1)), (m.group(2) or bare).lower()
    if not math.isfinite(value) or value < 0:
        raise ConfigError(f"{what} {text!r}: a duration must be a finite number >= 0")
    return value * UNITS[unit]


def format_duration(seconds: float) -> str:
    """The shortest exact-enough text for ``seconds``: ``500ms``, ``2s``, ``1.5m``."""
    if seconds < 1.0:
        return f"{seconds * 1e3:.4g}ms"
    if seconds < 120.0:
        return f"{seconds:.4g}s"
    if seconds < 7200.0:
        return f"{seconds / 60.0:.4g}m"
    return f"{seconds / 3600.0:.4g}h"


def _unit_name(unit: str) -> str:
    return {"s": "seconds", "ms": "milliseconds"}.get(unit, unit)
