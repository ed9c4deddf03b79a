"""The checking pass over a trace (the rules of ``--trace`` and ``--sessions`` that use
it are :mod:`infersight.bench.replay.rules`, docs/design.md section 3).

:func:`check_trace` reads every line once, before anything is sent, streaming the file
(one line in memory at a time; the arrival times are kept as 8-byte floats for the
window), and either refuses the run with one line naming the unusable lines by number,
or, with ``--on-bad-line skip``, counts them. An empty trace, and a ``--window`` that
selects no request, are one clear line too. The summary is kept per file (path, size,
modification time), so the run reuses the pass that validated its configuration.
"""

from __future__ import annotations

import array
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from infersight.bench.replay.formats import FORMATS, TraceEntry, detect_format
from infersight.bench.replay.read import Problem, in_arrival_order, read_trace
from infersight.core.durations import format_duration, parse_duration
from infersight.core.errors import ConfigError, file_error
from infersight.flags.bench import ReplaySection

__all__ = [
    "TraceSummary",
    "check_trace",
    "check_window",
    "parse_window",
    "sniff_format",
    "trace_summary",
]

#: Unusable lines named in the one-line error (the count says how many more).
SHOWN = 3


@dataclass(slots=True)
class TraceSummary:
    """What the checking pass learnt about a trace."""

    path: str
    fmt: str
    on_bad_line: str
    stamp: tuple[int, int]
    requests: int = 0
    bad: int = 0
    bad_shown: list[str] = field(default_factory=list)
    passed_over: dict[str, int] = field(default_factory=dict)
    #: Arrival times (trace clock) of every usable request, in arrival order.
    times: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: Longest original latency (access log): how far its lines are out of order.
    max_latency: float = 0.0
    sessions: int = 0
    shared_blocks: bool = False
    input_mean: float = 0.0
    output_mean: float = 0.0

    @property
    def origin(self) -> float:
        return float(self.times[0]) if self.times.size else 0.0

    def span(self) -> float:
        return float(self.times[-1] - self.times[0]) if self.times.size else 0.0

    def select(self, window: tuple[float, float | None]) -> tuple[int, int]:
        """Index range ``[i, j)`` of the requests inside ``window`` (from the origin)."""
        a = self.origin + window[0]
        i = int(np.searchsorted(self.times, a, "left"))
        if window[1] is None:
            return i, int(self.times.size)
        return i, int(np.searchsorted(self.times, self.origin + window[1], "left"))

    def describe(self) -> dict[str, Any]:
        return {
            "source": self.path,
            "format": self.fmt,
            "requests": self.requests,
            "span_s": round(self.span(), 3),
            "bad_lines": self.bad,
            "bad_examples": list(self.bad_shown),
            "passed_over": dict(self.passed_over),
            "sessions": self.sessions,
            "input_tokens_mean": round(self.input_mean, 1),
            "output_tokens_mean": round(self.output_mean, 1),
        }


#: Recent checking passes (a run checks its trace once, with its configuration).
_CACHE: OrderedDict[tuple[str, tuple[int, int], str, str], TraceSummary] = OrderedDict()
_CACHED = 4


def _stamp(p: Path) -> tuple[int, int]:
    try:
        st = p.stat()
    except OSError as e:
        raise file_error(p, e, "--trace") from None
    if not p.is_file():
        raise ConfigError(f"--trace {p}: not a file")
    return st.st_size, st.st_mtime_ns


def sniff_format(p: Path) -> str:
    """The format of ``p`` from its first non-empty line (one clear error otherwise)."""
    try:
        with p.open("rb") as f:
            first = next((ln for ln in f if ln.strip()), b"")
    except OSError as e:
        raise file_error(p, e, "--trace") from None
    if not first:
        raise ConfigError(f"--trace {p}: the file is empty: no request to replay")
    fmt = detect_format(first)
    if fmt is None:
        raise ConfigError(
            f"--trace {p}: cannot tell its format from the first line; "
            f"give --trace-format ({', '.join(FORMATS)})"
        )
    return fmt


def check_trace(path: str, fmt: str | None = None, on_bad_line: str = "error") -> TraceSummary:
    """Read the whole trace once; return its summary or raise one ConfigError line."""
    p = Path(path)
    stamp = _stamp(p)
    fmt = fmt or sniff_format(p)
    key = (str(p.resolve()), stamp, fmt, on_bad_line)
    if key in _CACHE:
        return _CACHE[key]
    s = TraceSummary(str(p), fmt, on_bad_line, stamp)
    times = array.array("d")
    sum_in = sum_out = 0
    sessions: set[str] = set()
    # The access log's lines are put in arrival order with the help of its longest
    # latency, so it is read twice (still one line at a time); other formats once.
    max_lat = _max_latency(p) if fmt == "gateway" else 0.0
    for item in in_arrival_order(read_trace(p, fmt), fmt, max_lat):
        if isinstance(item, Problem):
            _problem(s, item)
            continue
        _count(item, times, sessions)
        sum_in += item.input_tokens
        sum_out += item.output_tokens
        s.shared_blocks = s.shared_blocks or bool(item.hash_ids or item.prefix)
    s.requests = len(times)
    s.times = np.frombuffer(times, dtype=np.float64).copy() if times else np.zeros(0)
    s.max_latency, s.sessions = max_lat, len(sessions)
    s.input_mean = sum_in / s.requests if s.requests else 0.0
    s.output_mean = sum_out / s.requests if s.requests else 0.0
    _refuse(s)
    _CACHE[key] = s
    if len(_CACHE) > _CACHED:
        _CACHE.popitem(last=False)
    return s


def _max_latency(p: Path) -> float:
    out = 0.0
    for item in read_trace(p, "gateway"):
        if isinstance(item, TraceEntry) and item.end is not None and item.t is not None:
            out = max(out, item.end - item.t)
    return out


def _count(item: TraceEntry, times: array.array[float], sessions: set[str]) -> None:
    if item.session is not None:
        sessions.add(item.session)
    if item.t is not None:
        times.append(item.t)
    elif times:  # a later turn timed by its delay: it goes with the requests before it
        times.append(times[-1])


def _problem(s: TraceSummary, pr: Problem) -> None:
    if not pr.bad:
        s.passed_over[pr.reason] = s.passed_over.get(pr.reason, 0) + 1
        return
    s.bad += 1
    if len(s.bad_shown) < SHOWN:
        s.bad_shown.append(pr.text())


def _refuse(s: TraceSummary) -> None:
    where = f"--trace {s.path}"
    if s.bad and s.on_bad_line == "error":
        more = f" (and {s.bad - len(s.bad_shown)} more)" if s.bad > len(s.bad_shown) else ""
        raise ConfigError(
            f"{where}: {s.bad} unusable line{'s' if s.bad != 1 else ''}: "
            f"{'; '.join(s.bad_shown)}{more}; fix them, or give --on-bad-line skip"
        )
    if s.requests == 0:
        why = "; ".join(f"{n} {r}" for r, n in s.passed_over.items())
        skipped = f"{s.bad} unusable line(s) skipped" if s.bad else ""
        detail = "; ".join(x for x in (why, skipped) if x)
        raise ConfigError(f"{where}: no request to replay" + (f" ({detail})" if detail else ""))


def parse_window(text: str | None) -> tuple[float, float | None]:
    """``--window START-END`` (durations from the trace's first request; either side may
    be left out: ``10m-``, ``-30s``) as ``(start, end or None)``."""
    if text is None or not text.strip():
        return 0.0, None
    a, sep, b = text.strip().partition("-")
    if not sep:
        raise ConfigError(f"--window {text!r}: expected START-END, e.g. 10m-20m, 90s- or -5m")
    start = parse_duration(a, "--window start") if a.strip() else 0.0
    end = parse_duration(b, "--window end") if b.strip() else None
    if end is not None and end <= start:
        raise ConfigError(f"--window {text!r}: the end must come after the start")
    return start, end


def check_window(s: TraceSummary, window: tuple[float, float | None], text: str | None) -> None:
    """One clear line when the window selects no request."""
    i, j = s.select(window)
    if j > i:
        return
    raise ConfigError(
        f"--window {text}: selects no request; the trace's {s.requests} requests span "
        f"0s-{format_duration(s.span())} from its first"
    )


def trace_summary(replay: ReplaySection) -> TraceSummary:
    """The checked trace of ``replay`` (the checking pass runs once per file)."""
    assert replay.trace is not None
    return check_trace(replay.trace, replay.trace_format, replay.on_bad_line)
