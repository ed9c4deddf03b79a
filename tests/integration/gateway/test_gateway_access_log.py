"""The access log's buffered sink: one write per interval instead of one per request,
the same lines whichever path (direct sink or logging) they take."""

from __future__ import annotations

import io
import logging
import threading
from collections.abc import Iterator

import orjson
import pytest
from gateway_stack import CHAT, StackFactory

from infersight.gateway.access_log_writer import AccessLineHandler, access_log, flush_all, line_sink
from infersight_testkit.fake.openai import FakeConfig


class CountingStream(io.BytesIO):
    """A binary stream that counts its writes (each one a system call on a real fd)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, data: bytes) -> int:  # type: ignore[override]
        self.writes += 1
        return super().write(data)


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def access_logger() -> Iterator[logging.Logger]:
    """The access logger set up as the CLI does (no propagation), restored afterwards.
    Its handlers are set in the test body with :func:`only`: pytest attaches its own
    capture handlers once the test itself starts."""
    saved = (list(access_log.handlers), access_log.propagate, access_log.level)
    access_log.propagate = False
    access_log.setLevel(logging.INFO)
    try:
        yield access_log
    finally:
        access_log.handlers[:] = saved[0]
        access_log.propagate, access_log.level = saved[1], saved[2]


def only(logger: logging.Logger, *handlers: logging.Handler) -> None:
    logger.handlers[:] = handlers


async def test_lines_are_buffered_and_written_at_once(
    make_stack: StackFactory, access_logger: logging.Logger
) -> None:
    out = CountingStream()
    only(access_logger, AccessLineHandler(out))
    assert line_sink() is not None  # the direct path is taken
    ids = []
    async with make_stack([FakeConfig(tokens=4)]) as s:
        for i in range(30):
            status, headers, _ = await s.post(
                "/v1/chat/completions", {**CHAT, "stream": i % 2 == 1}
            )
            assert status == 200
            ids.append(headers["X-Request-Id"])
        status, headers, _ = await s.post("/v1/chat/completions", {"model": "fake"})
        assert status == 400
        ids.append(headers["X-Request-Id"])
        assert out.writes == 0  # nothing written per request
        flush_all()
    assert out.writes == 1
    lines = [orjson.loads(x) for x in out.getvalue().splitlines()]
    assert [x["request_id"] for x in lines] == ids
    assert [x["stream"] for x in lines[:30]] == [i % 2 == 1 for i in range(30)]
    assert all(x["status"] == 200 and x["completion_tokens"] == 4 for x in lines[:30])
    assert lines[30]["status"] == 400 and lines[30]["error"] == "BadRequest"
    assert all(x["request_id"].startswith("req-") for x in lines)
    assert len(set(ids)) == len(ids)


async def test_other_handlers_get_the_same_lines(
    make_stack: StackFactory, access_logger: logging.Logger
) -> None:
    out = CountingStream()
    other = Collect()
    only(access_logger, AccessLineHandler(out), other)
    assert line_sink() is None  # a second handler: the logging path
    async with make_stack([FakeConfig(tokens=3)]) as s:
        for i in range(6):
            assert (await s.post("/v1/chat/completions", {**CHAT, "stream": i % 2 == 1}))[0] == 200
        flush_all()
    written = out.getvalue().decode().splitlines()
    assert len(written) == 6 and written == other.lines


async def test_a_failover_names_the_upstreams_it_went_through(
    make_stack: StackFactory, access_logger: logging.Logger
) -> None:
    out = CountingStream()
    only(access_logger, AccessLineHandler(out))
    async with make_stack([FakeConfig(script=[503]), FakeConfig(tokens=2)]) as s:
        for _ in range(2):
            assert (await s.post("/v1/chat/completions", CHAT))[0] == 200
        flush_all()
    lines = [orjson.loads(x) for x in out.getvalue().splitlines()]
    moved = [x for x in lines if x["failovers"]]
    assert len(lines) == 2 and len(moved) == 1
    assert moved[0]["via"] == ["a", "b"] and moved[0]["upstream"] == "b"
    assert all("via" not in x for x in lines if not x["failovers"])


def test_a_full_buffer_is_written_and_a_closed_stream_is_no_failure() -> None:
    out = CountingStream()
    h = AccessLineHandler(out)
    line = b"x" * 1000
    for _ in range(h.max_buffer // 1001):
        h.write_line(line)
    assert out.writes == 0
    h.write_line(line)  # crosses max_buffer
    assert out.writes == 1 and out.getvalue().count(b"\n") == h.max_buffer // 1001 + 1
    out.close()
    h.write_line(b"after close")
    h.flush()  # a closed stdout (the reader went away) never fails a request


def test_sink_only_when_alone(access_logger: logging.Logger) -> None:
    only(access_logger)
    assert line_sink() is None  # no handler
    h = AccessLineHandler(CountingStream())
    only(access_logger, h)
    assert line_sink() is not None
    access_logger.propagate = True  # a root handler (caplog) would miss direct lines
    assert line_sink() is None
    access_logger.propagate = False
    access_logger.setLevel(logging.WARNING)
    assert line_sink() is None
    access_logger.setLevel(logging.INFO)
    h.addFilter(lambda r: False)
    assert line_sink() is None


def test_default_stream_is_stdout_as_it_is_at_flush(monkeypatch: pytest.MonkeyPatch) -> None:
    text = io.StringIO()  # a text-only stdout (no .buffer), as some harnesses install
    monkeypatch.setattr("sys.stdout", text)
    h = AccessLineHandler()
    h.write_line(b'{"request_id":"req-1"}')
    assert text.getvalue() == ""
    h.flush()
    assert text.getvalue() == '{"request_id":"req-1"}\n'


def test_lines_from_threads_arrive_whole_once_and_in_order_per_thread() -> None:
    out = CountingStream()
    h = AccessLineHandler(out)
    h.max_buffer = 4096  # many flushes while the threads write

    def writer(t: int) -> None:
        for i in range(2000):
            h.write_line(b'{"t":%d,"i":%d}' % (t, i))
            if i % 300 == 0:
                h.flush()

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    h.flush()
    lines = [orjson.loads(x) for x in out.getvalue().splitlines()]
    assert len(lines) == 8000 and out.writes > 10
    for t in range(4):
        assert [x["i"] for x in lines if x["t"] == t] == list(range(2000))
