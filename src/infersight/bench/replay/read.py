"""Reading a trace file as a stream: one line in memory at a time, never the file.

:func:`read_trace` yields, in file order, each line's :class:`TraceEntry` or a
:class:`Problem` (a line that cannot be used, or one passed over). Formats that require
time order get a problem for a line earlier than the one before it.

The gateway writes a line when its request *ends*, so arrival times in its access log
are out of order by up to the longest latency. :func:`in_arrival_order` puts them in
order while streaming: it holds a line until the log has reached, in end times, the
line's arrival plus the longest latency of the log (measured by the checking pass), so
the buffer holds only the requests of one latency's worth of time.
"""

from __future__ import annotations

import csv
import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from infersight.bench.replay.formats import (
    JSON_PARSERS,
    ORDERED_FORMATS,
    BadLine,
    PassOver,
    TraceEntry,
    burstgpt_columns,
    csv_columns,
    parse_burstgpt,
    parse_csv_row,
)

__all__ = ["Problem", "in_arrival_order", "read_trace"]

#: Slack on the access log's end-time order (its lines are written in end order by
#: one process; wall clocks may step back a little).
END_ORDER_SLACK_S = 1.0


@dataclass(frozen=True, slots=True)
class Problem:
    """A line not replayed: ``bad`` (unusable: ``--on-bad-line`` decides) or passed over."""

    line: int
    reason: str
    bad: bool = True

    def text(self) -> str:
        return f"line {self.line}: {self.reason}"


def _json_lines(path: Path, fmt: str) -> Iterator[TraceEntry | Problem]:
    parse = JSON_PARSERS[fmt]
    with path.open("rb") as f:
        for lineno, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                yield parse(raw, lineno)
            except BadLine as e:
                yield Problem(lineno, str(e))
            except PassOver as e:
                yield Problem(lineno, str(e), bad=False)


def _csv_lines(path: Path, fmt: str) -> Iterator[TraceEntry | Problem]:
    with path.open("r", encoding="utf-8", errors="replace", newline="") as f:
        reader = csv.reader(f)
        cols: dict[str, int] | None = None
        for row in reader:
            lineno = reader.line_num
            if not row or not any(c.strip() for c in row):
                continue
            try:
                if cols is None:
                    if fmt == "burstgpt":
                        cols = burstgpt_columns(row)
                        continue
                    cols = csv_columns(row)
                    if cols is not None:
                        continue
                    cols = {"t": 0, "in": 1, "out": 2}
                parse = parse_burstgpt if fmt == "burstgpt" else parse_csv_row
                yield parse(row, lineno, cols)
            except (BadLine, ValueError) as e:
                yield Problem(
                    lineno, str(e) if isinstance(e, BadLine) else "not the BurstGPT header"
                )
            except PassOver as e:
                yield Problem(lineno, str(e), bad=False)


def read_trace(path: str | Path, fmt: str) -> Iterator[TraceEntry | Problem]:
    """Every line of the trace in file order, as an entry or a problem."""
    p = Path(path)
    lines = _json_lines(p, fmt) if fmt in JSON_PARSERS else _csv_lines(p, fmt)
    if fmt not in ORDERED_FORMATS:
        yield from lines
        return
    last: float | None = None
    for item in lines:
        if isinstance(item, TraceEntry) and item.t is not None:
            if last is not None and item.t < last:
                yield Problem(
                    item.line,
                    f"time {item.t:.6g} s is before the previous "
                    f"request's {last:.6g} s (this format requires time order)",
                )
                continue
            last = item.t
        yield item


def in_arrival_order(
    items: Iterable[TraceEntry | Problem], fmt: str, max_latency: float
) -> Iterator[TraceEntry | Problem]:
    """The entries by arrival time (ties in file order); problems as they come.

    Only the access log needs this; other formats are already in order. A line whose
    end comes before an earlier line's end by more than the slack breaks the order the
    gateway writes, and is a problem.
    """
    if fmt != "gateway":
        yield from items
        return
    held: list[tuple[float, int, TraceEntry]] = []
    hold = max_latency + END_ORDER_SLACK_S
    last_end: float | None = None
    for item in items:
        if isinstance(item, Problem):
            yield item
            continue
        assert item.t is not None and item.end is not None
        if last_end is not None and item.end < last_end - END_ORDER_SLACK_S:
            yield Problem(
                item.line,
                "ends before an earlier line's request: the log is "
                "not in the order one gateway writes it (give one gateway's log, "
                "or sort the lines by arrival_ts)",
            )
            continue
        last_end = item.end if last_end is None else max(last_end, item.end)
        heapq.heappush(held, (item.t, item.line, item))
        while held and held[0][0] < last_end - hold:
            yield heapq.heappop(held)[2]
    while held:
        yield heapq.heappop(held)[2]
