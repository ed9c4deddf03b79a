"""Trace files in every format, generated here (no downloads), read back exactly
(Hypothesis): times, lengths, shared blocks, sessions; and the access log's lines,
written in the order requests end, come out in arrival order."""

from __future__ import annotations

import atexit
import csv
import itertools
import shutil
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.bench.replay.check import check_trace, sniff_format
from infersight.bench.replay.feed import RequestShape, TraceFeed
from infersight.bench.replay.formats import TraceEntry, detect_format

_DIR = Path(tempfile.mkdtemp(prefix="infersight-trace-test-"))
atexit.register(shutil.rmtree, _DIR, ignore_errors=True)
_NAMES = itertools.count()

#: (gap ms, input tokens, output tokens, hash ids)
rows = st.lists(
    st.tuples(
        st.integers(0, 5000),
        st.integers(1, 5000),
        st.integers(1, 2000),
        st.lists(st.integers(0, 50), max_size=6),
    ),
    min_size=1,
    max_size=30,
)


def _file(suffix: str, text: str) -> Path:
    """A fresh file per example (the checking pass is cached per file and stamp)."""
    p = _DIR / f"t{next(_NAMES)}{suffix}"
    p.write_text(text)
    return p


def _feed(path: Path, fmt: str, speedup: float = 1.0) -> list[tuple[int, float, TraceEntry]]:
    s = check_trace(str(path), fmt)
    shape = RequestShape(("the",), 0, "m", "chat", True, False)
    feed = TraceFeed(str(path), s.fmt, s.max_latency, s.origin, None, speedup, shape)
    return list(feed.entries())


def _mooncake(data: list[tuple[int, int, int, list[int]]]) -> tuple[str, list[float]]:
    lines, times, t = [], [], 0
    for gap, n_in, n_out, hashes in data:
        t += gap
        times.append(t / 1000.0)
        lines.append(
            orjson.dumps(
                {"timestamp": t, "input_length": n_in, "output_length": n_out, "hash_ids": hashes}
            ).decode()
        )
    return "\n".join(lines) + "\n", times


@given(rows, st.floats(0.25, 8.0))
@settings(max_examples=60, deadline=None)
def test_mooncake_lines_read_back_exactly(data: list[Any], speedup: float) -> None:
    text, times = _mooncake(data)
    path = _file(".jsonl", text)
    assert sniff_format(path) == "mooncake"
    s = check_trace(str(path))
    assert s.requests == len(data) and list(s.times) == times
    got = _feed(path, "mooncake", speedup)
    assert [i for i, _, _ in got] == list(range(len(data)))
    for (_, off, e), (_, n_in, n_out, hashes), t in zip(got, data, times, strict=True):
        assert (e.input_tokens, e.output_tokens, list(e.hash_ids)) == (n_in, n_out, hashes)
        assert off == pytest.approx((t - times[0]) / speedup)


@given(rows, st.booleans(), st.booleans())
@settings(max_examples=60, deadline=None)
def test_plain_csv_with_or_without_header_and_sessions(
    data: list[Any], header: bool, sessions: bool
) -> None:
    lines = []
    if header:
        lines.append("input_tokens,timestamp,output_tokens" + (",session_id" if sessions else ""))
    t, times = 0, []
    for i, (gap, n_in, n_out, _) in enumerate(data):
        t += gap
        times.append(t / 1000.0)
        cells = (
            [str(n_in), f"{t / 1000.0!r}", str(n_out)]
            if header
            else [f"{t / 1000.0!r}", str(n_in), str(n_out)]
        )
        if header and sessions:
            cells.append(f"conv-{i % 3}")
        lines.append(",".join(cells))
    path = _file(".csv", "\n".join(lines) + "\n")
    assert sniff_format(path) == "csv"
    got = _feed(path, "csv")
    assert [e.t for _, _, e in got] == times
    assert [(e.input_tokens, e.output_tokens) for _, _, e in got] == [(a, b) for _, a, b, _ in data]
    want_sessions = (
        [f"conv-{i % 3}" for i in range(len(data))] if header and sessions else [None] * len(data)
    )
    assert [e.session for _, _, e in got] == want_sessions


@given(rows, st.lists(st.booleans(), min_size=30, max_size=30))
@settings(max_examples=60, deadline=None)
def test_burstgpt_rows_and_failed_rows(data: list[Any], failed: list[bool]) -> None:
    with (_DIR / "bgpt.tmp").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            ["Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type"]
        )
        t, want = 0, []
        for (gap, n_in, n_out, _), bad in zip(data, failed, strict=False):
            t += gap
            out = 0 if bad else n_out
            w.writerow([t / 1000.0, "ChatGPT", n_in, out, n_in + out, "Conversation log"])
            if not bad:
                want.append((t / 1000.0, n_in, n_out))
    path = _file(".csv", (_DIR / "bgpt.tmp").read_text())
    assert sniff_format(path) == "burstgpt"
    n_failed = sum(failed[: len(data)])
    if not want:
        return  # every row failed in the original: refused (test_bad_input covers it)
    s = check_trace(str(path))
    assert s.requests == len(want)
    assert sum(s.passed_over.values()) == n_failed
    got = _feed(path, "burstgpt")
    assert [(e.t, e.input_tokens, e.output_tokens) for _, _, e in got] == want


def _access_line(
    arrival: float, latency_ms: float, n_in: int, n_out: int, i: int
) -> dict[str, Any]:
    return {
        "v": 1,
        "ts": arrival + latency_ms / 1000.0,
        "arrival_ts": arrival,
        "request_id": f"r{i}",
        "endpoint": "chat",
        "status": 200,
        "latency_ms": latency_ms,
        "model": "m",
        "stream": True,
        "key": None,
        "error": None,
        "prompt_tokens": n_in,
        "completion_tokens": n_out,
        "session": f"s-{i % 2}",
        "prefix": [["system", "aaaa", 40], ["user", f"{i:04x}", 10]],
    }


@given(
    st.lists(
        st.tuples(
            st.integers(0, 3000), st.integers(1, 20_000), st.integers(1, 3000), st.integers(1, 500)
        ),
        min_size=1,
        max_size=40,
    )
)
@settings(max_examples=80, deadline=None)
def test_access_log_written_at_the_end_is_replayed_in_arrival_order(data: list[Any]) -> None:
    """Lines come in end order (as the gateway writes them); replay wants arrivals."""
    t, lines = 1_700_000_000.0, []
    for i, (gap_ms, lat_ms, n_in, n_out) in enumerate(data):
        t += gap_ms / 1000.0
        lines.append(_access_line(t, float(lat_ms), n_in, n_out, i))
    written = sorted(lines, key=lambda d: d["ts"])
    path = _file(".jsonl", "".join(orjson.dumps(d).decode() + "\n" for d in written))
    assert sniff_format(path) == "gateway"
    got = _feed(path, "gateway")
    want = sorted(lines, key=lambda d: (d["arrival_ts"], written.index(d)))
    assert [e.t for _, _, e in got] == [d["arrival_ts"] for d in want]
    assert [(e.input_tokens, e.output_tokens) for _, _, e in got] == [
        (d["prompt_tokens"], d["completion_tokens"]) for d in want
    ]
    first = int(want[0]["request_id"][1:])
    assert got[0][2].prefix == (("system", "aaaa", 40), ("user", f"{first:04x}", 10))
    assert {e.session for _, _, e in got} <= {"s-0", "s-1"}


def test_access_log_lines_that_are_not_requests_are_passed_over(tmp_path: Path) -> None:
    ok = _access_line(100.0, 50.0, 10, 5, 0)
    lines = [
        {**ok, "endpoint": "embeddings"},
        {
            "v": 1,
            "ts": 100.2,
            "arrival_ts": 100.1,
            "request_id": "x",
            "endpoint": "admin",
            "status": 401,
            "latency_ms": 0.1,
            "error": "AuthError",
        },
        {**ok, "status": 503, "error": "Overloaded", "prompt_tokens": 0, "completion_tokens": 0},
        ok,
    ]
    path = tmp_path / "a.jsonl"
    path.write_text("".join(orjson.dumps(d).decode() + "\n" for d in lines))
    s = check_trace(str(path))
    assert s.requests == 1 and sum(s.passed_over.values()) == 3
    # an older line without arrival_ts: its arrival is ts - latency
    old = {k: v for k, v in ok.items() if k not in ("v", "arrival_ts")}
    path2 = tmp_path / "old.jsonl"
    path2.write_text(orjson.dumps(old).decode() + "\n")
    assert check_trace(str(path2)).times[0] == pytest.approx(100.0)


@pytest.mark.parametrize(
    ("first", "fmt"),
    [
        (b'{"timestamp": 0, "input_length": 5, "output_length": 1}', "mooncake"),
        (b'{"hash_ids": [1], "input_length": 5}', "mooncake"),
        (b'{"v": 1, "ts": 1.0, "latency_ms": 2, "request_id": "a"}', "gateway"),
        (b"Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type", "burstgpt"),
        (b"timestamp,input_tokens,output_tokens", "csv"),
        (b"0.5,12,30", "csv"),
        (b'{"something": "else"}', None),
        (b"[1, 2]", None),
        (b"no commas here", None),
    ],
)
def test_format_detection(first: bytes, fmt: str | None) -> None:
    assert detect_format(first) == fmt
