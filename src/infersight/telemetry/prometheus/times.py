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

from infersight.core.durations import parse_duration as core_parse_duration
from infersight.core.errors import ConfigError

__all__ = ["parse_duration", "parse_time", "promql_duration", "resolve_range"]

_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def parse_duration(text: str, what: str = "duration") -> float:
    """Seconds in ``text`` (``1h30m`` -> 5400.0; the one syntax of ``core.durations``);
    ConfigError when it is not a duration > 0 (a range or step cannot be empty)."""
    value = core_parse_duration(text, what)
    if value <= 0:
        raise ConfigError(f"{what} {text!r}: must be longer than 0")
    return value


def promql_duration(seconds: float) -> str:
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
        raise ConfigError(
            f"{what} {text!r}: expected RFC 3339 (2024-05-01T14:00:00Z), Unix "
            "seconds, 'now' or 'now-2h'"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def resolve_range(
    *, since: str | None, start: str | None, end: str | None, step: float, now: float | None = None
) -> tuple[float, float]:
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
        raise ConfigError(
            f"the range {promql_duration(max(0.0, t1 - t0))} is shorter than one "
            f"--step ({promql_duration(step)}): widen it or lower --step"
        )
    if t1 > now + step:
        raise ConfigError("--end is in the future")
    return t0, t1
