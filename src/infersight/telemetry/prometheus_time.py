"""Durations and times as Prometheus users write them.

Durations use Prometheus' syntax (``15s``, ``5m``, ``1h30m``, ``2d``, ``1w``, ``500ms``)
or plain seconds (``90``, ``0.5``). Times are RFC 3339 / ISO 8601
(``2024-05-01T14:00:00Z``; without an offset: UTC, as Prometheus shows them), Unix
seconds (``1714572000``), ``now`` or ``now-2h``.
"""

from __future__ import annotations

import math
import re
import time
from datetime import UTC, datetime

from infersight.core.errors import ConfigError

__all__ = ["format_duration", "parse_duration", "parse_time", "resolve_range"]

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0,
          "y": 31536000.0}  # fmt: skip
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def parse_duration(text: str, what: str = "duration") -> float:
    """Seconds in ``text`` (``1h30m`` -> 5400.0); ConfigError when it is not a duration > 0."""
    s = str(text).strip().lower()
    if _NUMBER.fullmatch(s):
        value = float(s)
    else:
        pos, value = 0, 0.0
        for m in _PART.finditer(s):
            if m.start() != pos:
                break
            value += float(m.group(1)) * _UNITS[m.group(2)]
            pos = m.end()
        if pos != len(s) or not s:
            raise ConfigError(f"{what} {text!r}: expected a duration like 15s, 5m, 1h30m or 2d")
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{what} {text!r}: must be longer than 0")
    return value


def format_duration(seconds: float) -> str:
    """``5400`` -> ``1h30m``; ``0.5`` -> ``500ms`` (whole units, largest first; exact,
    so it can stand in a PromQL range)."""
    if seconds < 1 or abs(seconds - round(seconds)) > 1e-6:
        return f"{round(seconds * 1000)}ms"
    out, rest = [], round(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        n, rest = divmod(rest, size)
        if n:
            out.append(f"{n}{unit}")
    return "".join(out) or "0s"


def parse_time(text: str, what: str, now: float | None = None) -> float:
    """Unix seconds of ``text`` (RFC 3339, Unix seconds, ``now``, ``now-1h``)."""
    s = str(text).strip()
    now = time.time() if now is None else now
    if s.lower() == "now":
        return now
    if s.lower().startswith("now-"):
        return now - parse_duration(s[4:], what)
    if _NUMBER.fullmatch(s):
        return float(s)
    try:
        dt = datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ConfigError(f"{what} {text!r}: expected RFC 3339 (2024-05-01T14:00:00Z), Unix "
                          "seconds, 'now' or 'now-2h'") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def resolve_range(*, since: str | None, start: str | None, end: str | None, step: float,
                  now: float | None = None) -> tuple[float, float]:
    """``(start, end)`` from ``--since`` or ``--start``/``--end`` (end defaults to now),
    aligned down to multiples of ``step`` so that reruns see the same points."""
    now = time.time() if now is None else now
    if since and start:
        raise ConfigError("give --since or --start, not both")
    t1 = parse_time(end, "--end", now) if end else now
    if start:
        t0 = parse_time(start, "--start", now)
    else:
        t0 = t1 - parse_duration(since or "1h", "--since")
    t0, t1 = math.floor(t0 / step) * step, math.floor(t1 / step) * step
    if t1 - t0 < step:
        raise ConfigError(f"the range {format_duration(max(0.0, t1 - t0))} is shorter than one "
                          f"--step ({format_duration(step)}): widen it or lower --step")
    if t1 > now + step:
        raise ConfigError("--end is in the future")
    return t0, t1
