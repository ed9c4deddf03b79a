"""The access log: one JSON line per request on the ``infersight.gateway.access`` logger.

Building a ``LogRecord`` and running the logging machinery for every request costs
more gateway CPU than anything else the gateway itself does per request, and a
stdout that is unbuffered (``PYTHONUNBUFFERED``, as containers often set) adds a
write system call per line. So `infersight gateway` installs an
:class:`AccessLineHandler`: it keeps lines in a buffer written out every 0.25 s (or
at 64 KiB), and while it is the logger's only handler (no filters, no propagation)
:func:`line_sink` hands the gateway its buffer directly, skipping the ``LogRecord``.
With any other setup (a user's handler, a test's ``caplog``) lines take the logging
path, so every handler sees the same lines either way.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
from collections.abc import Callable
from typing import BinaryIO

__all__ = ["AccessLineHandler", "access_log", "flush_all", "flush_periodically", "line_sink"]

access_log = logging.getLogger("infersight.gateway.access")


class AccessLineHandler(logging.Handler):
    """Buffers whole lines (the record's message, no other formatting) and writes
    them to a binary stream every :attr:`interval` s or :attr:`max_buffer` bytes."""

    interval = 0.25
    max_buffer = 64 * 1024

    def __init__(self, stream: BinaryIO | None = None) -> None:
        super().__init__(logging.INFO)
        self._stream = stream
        self._buf = bytearray()
        self._wlock = threading.Lock()  # the buffer
        self._flock = threading.Lock()  # the stream

    def emit(self, record: logging.LogRecord) -> None:
        self.write_line(record.getMessage().encode())

    def write_line(self, line: bytes) -> None:
        """Append one line (without its newline); write out when the buffer is full."""
        with self._wlock:  # uncontended on the event loop; a line from a thread waits
            buf = self._buf
            buf += line
            buf += b"\n"
            full = len(buf) >= self.max_buffer
        if full:
            self.flush()

    def flush(self) -> None:
        """Write what is buffered (the serve loop calls this every :attr:`interval` s)."""
        # One writer at a time, holding the stream before taking the buffer, keeps the
        # lines in order; writers of lines only wait for the buffer, never the stream.
        with self._flock:
            with self._wlock:
                if not self._buf:
                    return
                data = bytes(self._buf)
                self._buf.clear()
            try:
                stream = self._stream
                if stream is None:  # stdout as it is now (it may have been replaced)
                    out = sys.stdout
                    out.flush()
                    raw = getattr(out, "buffer", None)
                    if raw is None:  # a text-only stream
                        out.write(data.decode())
                        out.flush()
                        return
                    stream = raw
                stream.write(data)
                stream.flush()
            except (OSError, ValueError):
                # The reader went away (a closed pipe): like logging, never fail a request.
                pass

    def close(self) -> None:
        self.flush()
        super().close()


def line_sink() -> Callable[[bytes], None] | None:
    """The :class:`AccessLineHandler`'s ``write_line`` when it alone would receive an
    INFO record of the access logger; None when the logging path must be taken."""
    lg = access_log
    hs = lg.handlers
    if len(hs) != 1 or lg.propagate or lg.filters or lg.disabled:
        return None
    h = hs[0]
    if h.__class__ is not AccessLineHandler or h.filters or h.level > logging.INFO:
        return None
    if not lg.isEnabledFor(logging.INFO):
        return None
    return h.write_line


async def flush_periodically() -> None:
    """Write out the access log's buffered lines every :attr:`AccessLineHandler.interval`
    s, so no line waits longer (run as a task while serving)."""
    while True:
        await asyncio.sleep(AccessLineHandler.interval)
        flush_all()


def flush_all() -> None:
    for h in access_log.handlers:
        h.flush()
