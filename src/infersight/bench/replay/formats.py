"""Trace formats ``bench --trace`` reads: one parser per format, one line at a time.

- ``gateway``: infersight gateway's access log (docs/access-log.md), JSON lines; times
  are Unix seconds (``arrival_ts``; older lines: ``ts - latency_ms``).
- ``mooncake``: Mooncake / AIPerf JSON lines: ``timestamp`` (ms), ``input_length``,
  ``output_length``, optional ``hash_ids`` (blocks of ``block_size`` tokens: a shared
  id is a shared block of prefix), ``session_id`` and ``delay`` (ms of think time
  before this turn, AIPerf's multi-turn field), or ``text_input`` instead of a length.
- ``burstgpt``: BurstGPT CSV: ``Timestamp`` (s), ``Model``, ``Request tokens``,
  ``Response tokens``, ``Total tokens``, ``Log Type``. A row with 0 response tokens
  failed in the original service: it is passed over and counted, not replayed.
- ``csv``: ``timestamp, input_tokens, output_tokens`` (seconds; an optional header may
  name the columns, and a ``session_id`` column).

A parser returns a :class:`TraceEntry`, raises :class:`BadLine` for a line that cannot
be used (``--on-bad-line`` decides), or :class:`PassOver` for a well-formed line that
is not a request to replay (an embeddings call, a request that failed in the original).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import orjson

from infersight.core.access_log_format import AccessLogLine

__all__ = [
    "FORMATS",
    "JSON_PARSERS",
    "ORDERED_FORMATS",
    "BadLine",
    "PassOver",
    "TraceEntry",
    "burstgpt_columns",
    "csv_columns",
    "detect_format",
    "parse_burstgpt",
    "parse_csv_row",
]

FORMATS = ("gateway", "mooncake", "burstgpt", "csv")
#: Formats whose lines must come in time order (the access log is written as requests
#: end, so its arrival times are put in order while it streams).
ORDERED_FORMATS = frozenset({"mooncake", "burstgpt", "csv"})
BURSTGPT_HEADER = ("Timestamp", "Model", "Request tokens", "Response tokens")
#: The first cell of a plain CSV: a number, or a column name.
_CSV_FIRST = re.compile(r"[-+0-9.eE]+|[A-Za-z_][A-Za-z0-9_ ]*")


class BadLine(ValueError):
    """A line that cannot be used; the message says why (the caller adds the line)."""


class PassOver(Exception):
    """A well-formed line that is not a request to replay; the message says what it is."""


@dataclass(slots=True)
class TraceEntry:
    """One request of a trace, in the trace's own terms (times in seconds)."""

    line: int
    #: Arrival time on the trace's clock; None for a turn timed only by ``think``.
    t: float | None
    input_tokens: int
    output_tokens: int
    #: Mooncake blocks: equal ids are equal blocks of prefix.
    hash_ids: tuple[int, ...] = ()
    #: Access log: (role, chained hash, characters) per message.
    prefix: tuple[tuple[str, str, int], ...] = ()
    session: str | None = None
    #: Seconds the user waited after the previous turn's answer.
    think: float | None = None
    #: When the original request ended (access log), for the next turn's think time.
    end: float | None = None
    stream: bool | None = None
    endpoint: str | None = None
    text: str | None = None


def _num(v: Any, what: str) -> float:
    if v is None:
        raise BadLine(f"{what} is missing")
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise BadLine(f"{what} is {v!r}, not a number")
    x = float(v)
    if not math.isfinite(x):
        raise BadLine(f"{what} is {v!r}, not a finite number")
    if x < 0:
        raise BadLine(f"{what} is negative ({v!r})")
    return x


def _tokens(v: Any, what: str, *, minimum: int = 1) -> int:
    x = _num(v, what)
    if x != int(x) or x < minimum:
        raise BadLine(f"{what} is {v!r}: a whole number >= {minimum} is needed")
    return int(x)


def _obj(raw: bytes) -> dict[str, Any]:
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise BadLine(f"invalid JSON ({e})") from None
    if not isinstance(obj, dict):
        raise BadLine("not a JSON object")
    return obj


def _session(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, str | int) and not isinstance(v, bool) and str(v):
        return str(v)
    raise BadLine(f"session_id is {v!r}, not a string")


def parse_mooncake(raw: bytes, line: int) -> TraceEntry:
    o = _obj(raw)
    session = _session(o.get("session_id"))
    delay = o.get("delay")
    think = None if delay is None else _num(delay, "delay") / 1000.0
    ts = o.get("timestamp")
    if ts is None and not (session is not None and think is not None):
        raise BadLine("timestamp is missing (only a session's later turn may give a delay instead)")
    t = None if ts is None else _num(ts, "timestamp") / 1000.0
    text = o.get("text_input")
    if text is not None and not (isinstance(text, str) and text):
        raise BadLine("text_input must be a non-empty string")
    n_in = (
        _tokens(o.get("input_length"), "input_length") if text is None else max(1, len(text) // 4)
    )
    hashes = o.get("hash_ids") or []
    if not isinstance(hashes, list) or not all(
        isinstance(h, int) and not isinstance(h, bool) for h in hashes
    ):
        raise BadLine("hash_ids must be a list of integers")
    return TraceEntry(
        line,
        t,
        n_in,
        _tokens(o.get("output_length"), "output_length"),
        hash_ids=tuple(hashes),
        session=session,
        think=think,
        text=text,
    )


def _prefix(v: Any) -> tuple[tuple[str, str, int], ...]:
    if v is None:
        return ()
    ok = isinstance(v, list) and all(
        isinstance(p, list)
        and len(p) == 3
        and isinstance(p[0], str)
        and isinstance(p[1], str)
        and isinstance(p[2], int)
        and p[2] >= 0
        for p in v
    )
    if not ok:
        raise BadLine("prefix must be a list of [role, hash, chars]")
    return tuple((str(p[0]), str(p[1]), int(p[2])) for p in v)


def parse_gateway(raw: bytes, line: int) -> TraceEntry:
    # The keys the gateway writes, checked against the one definition by mypy; the
    # values are still checked one by one (a log may come from anywhere).
    o = cast(AccessLogLine, _obj(raw))
    endpoint = o.get("endpoint")
    if endpoint not in ("chat", "completions"):
        raise PassOver(f"not a generation request (endpoint {endpoint!r})")
    status = o.get("status")
    if (
        not isinstance(status, int)
        or not 200 <= status < 300
        or o.get("error") not in (None, "none")
    ):
        raise PassOver("failed in the original (no token counts to replay)")
    latency = _num(o.get("latency_ms"), "latency_ms") / 1000.0
    if "arrival_ts" in o:
        t = _num(o["arrival_ts"], "arrival_ts")
        end = t + latency
    else:  # lines written before the format had arrival_ts (no "v")
        end = _num(o.get("ts"), "ts")
        t = end - latency
    n_out = _tokens(o.get("completion_tokens"), "completion_tokens", minimum=0)
    if n_out == 0:
        raise PassOver("answered with no completion tokens")
    stream = o.get("stream")
    return TraceEntry(
        line,
        t,
        _tokens(o.get("prompt_tokens"), "prompt_tokens"),
        n_out,
        prefix=_prefix(o.get("prefix")),
        session=_session(o.get("session")),
        end=end,
        stream=stream if isinstance(stream, bool) else None,
        endpoint=str(endpoint),
    )


def csv_columns(header: Sequence[str]) -> dict[str, int] | None:
    """A plain CSV header's columns (``{"t", "in", "out", "session"?}``), or None when
    the row is data, not a header."""
    names = [h.strip().lower() for h in header]
    try:
        float(names[0])
        return None
    except (ValueError, IndexError):
        pass
    aliases = {
        "t": ("timestamp", "time", "ts", "arrival", "arrival_time"),
        "in": ("input_tokens", "input_length", "prompt_tokens", "input", "request_tokens"),
        "out": ("output_tokens", "output_length", "completion_tokens", "output", "response_tokens"),
        "session": ("session_id", "session", "conversation_id"),
    }
    cols = {k: next((names.index(a) for a in al if a in names), -1) for k, al in aliases.items()}
    missing = [k for k in ("t", "in", "out") if cols[k] < 0]
    if missing:
        raise BadLine("a CSV header needs timestamp, input_tokens and output_tokens columns")
    return {k: v for k, v in cols.items() if v >= 0}


def _cell(row: Sequence[str], i: int, what: str) -> float:
    if i >= len(row) or not row[i].strip():
        raise BadLine(f"{what} is missing")
    try:
        value = float(row[i])
    except ValueError:
        raise BadLine(f"{what} is {row[i]!r}, not a number") from None
    return _num(value, what)


def parse_csv_row(row: Sequence[str], line: int, cols: dict[str, int]) -> TraceEntry:
    t = _cell(row, cols["t"], "timestamp")
    n_in = _tokens(_cell(row, cols["in"], "input_tokens"), "input_tokens")
    n_out = _tokens(_cell(row, cols["out"], "output_tokens"), "output_tokens")
    si = cols.get("session")
    session = row[si].strip() or None if si is not None and si < len(row) else None
    return TraceEntry(line, t, n_in, n_out, session=session)


def parse_burstgpt(row: Sequence[str], line: int, cols: dict[str, int]) -> TraceEntry:
    t = _cell(row, cols["t"], "Timestamp")
    n_in = _tokens(_cell(row, cols["in"], "Request tokens"), "Request tokens")
    n_out = _tokens(_cell(row, cols["out"], "Response tokens"), "Response tokens", minimum=0)
    if n_out == 0:
        raise PassOver("failed in the original (0 response tokens)")
    return TraceEntry(line, t, n_in, n_out)


def burstgpt_columns(header: Sequence[str]) -> dict[str, int]:
    names = [h.strip() for h in header]
    return {
        "t": names.index("Timestamp"),
        "in": names.index("Request tokens"),
        "out": names.index("Response tokens"),
    }


def detect_format(first: bytes) -> str | None:
    """The format of a trace from its first non-empty line, or None."""
    s = first.strip()
    if s.startswith(b"{"):
        try:
            o = orjson.loads(s)
        except orjson.JSONDecodeError:
            return None
        if not isinstance(o, dict):
            return None
        if "latency_ms" in o or "request_id" in o or "arrival_ts" in o:
            return "gateway"
        if "input_length" in o or "hash_ids" in o or "text_input" in o or "timestamp" in o:
            return "mooncake"
        return None
    text = s.decode("utf-8", "replace")
    if all(h in text for h in BURSTGPT_HEADER):
        return "burstgpt"
    first_cell = text.split(",", 1)[0].strip().strip('"')
    if "," not in text or not _CSV_FIRST.fullmatch(first_cell):
        return None
    return "csv"  # a row of numbers, or a header (checked when the file is read)


#: A JSON-lines parser: (raw line, line number) -> entry.
JsonParser = Callable[[bytes, int], TraceEntry]
JSON_PARSERS: dict[str, JsonParser] = {"gateway": parse_gateway, "mooncake": parse_mooncake}
