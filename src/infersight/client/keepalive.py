"""What a client learns about how its server keeps connections alive.

Some servers announce keep-alive and still end the connection after every streamed
answer. llama.cpp's server is one (checked against ``tools/server/server-http.cpp``
and cpp-httplib): its chunked content provider returns ``has_next``, false after
the last chunk, and cpp-httplib takes a provider's false as a cancelled write, so it
leaves its keep-alive loop and closes the socket; it never reads from it again. The
close comes right after the final ``0\\r\\n\\r\\n`` when the HTTP thread runs at once,
or milliseconds later when it is descheduled (on a busy CPU engine, often). A request
written on the pooled connection in that gap is never read by the server, yet the
client cannot prove it (docs/design.md section 3 only allows a resend when nothing was
written), so it would be lost.

So once the client knows the server does this, it keeps no connection that carried a
streamed answer: the response's connection is marked to close when the answer ends
(aiohttp's ``force_close``), and no later request can be written into a connection
the server is closing. The client knows it:

- from the ``Server: llama.cpp`` header on any answer (before its first streamed
  answer is over, so no request is ever exposed to the race); or
- from evidence, for servers not known by name: a pooled connection whose previous
  answer was streamed and ended less than :data:`QUICK_CLOSE` seconds earlier was
  found closed by the server (before our request was written, or after, without an
  answer). Idle timeouts of real servers are seconds long (gunicorn 2 s, uvicorn and
  cpp-httplib 5 s, nginx 75 s), so such a quick close is the server's habit, not
  an idle timeout.
"""

from __future__ import annotations

import time
from typing import Any

import aiohttp

from infersight.core.records import RequestRecord

__all__ = ["QUICK_CLOSE", "KeepAlive"]

#: Seconds after a streamed answer within which a close by the server is its habit.
QUICK_CLOSE = 1.0

#: ``Server`` header values (lowercase prefixes) of servers known to close the
#: connection after each streamed answer, with the reason shown to users.
_KNOWN = {
    "llama.cpp": "llama.cpp's server closes the connection after each streamed answer "
    "(although it announces keep-alive)",
}


class KeepAlive:
    """One client's knowledge of its server's keep-alive habits (see the module doc)."""

    __slots__ = ("closes_after_stream",)

    def __init__(self) -> None:
        #: Why the client believes the server closes connections after streamed
        #: answers; None while it has no reason to.
        self.closes_after_stream: str | None = None

    def on_response(self, resp: aiohttp.ClientResponse, streamed: bool) -> None:
        """Learn from an answer's headers; keep a streamed answer's connection out of
        the pool when the server will close it anyway."""
        if self.closes_after_stream is None:
            server = resp.headers.get("Server", "").lower()
            for prefix, why in _KNOWN.items():
                if server.startswith(prefix):
                    self.closes_after_stream = why
                    break
        if streamed and self.closes_after_stream is not None:
            conn = resp.connection
            proto: Any = conn.protocol if conn is not None else None
            if proto is not None:
                proto.force_close()

    def on_dropped(self, previous: RequestRecord | None, streamed: bool) -> None:
        """A pooled connection was found closed by the server; ``previous`` is the
        record of the request it carried before (if any) and ``streamed`` whether
        that answer was streamed."""
        if self.closes_after_stream is not None or not streamed or previous is None:
            return
        end = previous.end
        if end is None or not previous.ok:
            return
        gap = time.monotonic() - end
        if gap < QUICK_CLOSE:
            self.closes_after_stream = (
                f"the server closed a connection {gap * 1000:.0f} ms after a streamed "
                "answer although it announces keep-alive"
            )
