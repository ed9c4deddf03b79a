"""The resend rule (docs/design.md section 3): a request goes out again, without counting
an attempt, only when it provably never reached the server.

A keep-alive pool holds connections that the server may close while they are idle.
llama.cpp's HTTP server, for one, announces ``Keep-Alive`` and then closes the
connection right after every streamed answer (its chunked content provider returns
false, which makes cpp-httplib end the connection). The next request that takes such
a connection from the pool would fail, although the server never read a byte of it.

Proof that the server cannot have read the request: no byte of it was written, and at
the last moment before the first write the pooled connection is already closed by the
peer. "Closed" is what the event loop knows (the transport is closing or gone) or what
the kernel knows and the loop has not processed yet: an idle HTTP/1.1 connection has
nothing to read, so a readable socket means the server's FIN, a reset, or bytes it
sent unasked, all of which end the connection. The check runs twice, because aiohttp
writes the head together with the body from a separate task on Python < 3.12: once in
:meth:`TimedRequest.send` (before the head is serialised) and once in
:meth:`TimedRequest.write_bytes` (before the first byte reaches the transport; nothing
in between can write).

Such a request is sent again through the pool (which hands out the next idle
connection, checked the same way, or opens a new one) and counted in
``RequestRecord.resends``. Anything else — a reset or an EOF after the request was
written — may have reached the server: that is a ResetError for the retry policy.
Both kinds of drop teach the client's :class:`~infersight.client.keepalive.KeepAlive`
about its server, so that a server that closes after streamed answers stops being
given the chance to close a connection under a request.
"""

from __future__ import annotations

import contextvars
import select
import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

from infersight.client.keepalive import KeepAlive
from infersight.core.records import RequestRecord

__all__ = ["MAX_RESENDS", "StaleConnection", "TimedRequest", "open_response", "peer_closed"]

#: A safety bound only: each resend closes one pooled connection, so the pool runs dry
#: and a new connection (never resent) is used long before this.
MAX_RESENDS = 100


class StaleConnection(aiohttp.ClientConnectionError):
    """A pooled connection was found closed before any byte of the request was written.

    Not an OSError subclass, so aiohttp never retries it by itself: the client does.
    """


@dataclass(slots=True)
class _Send:
    """One try at writing one request: what :class:`TimedRequest` found out."""

    rec: RequestRecord | None
    #: The request asks for a streamed answer (SSE).
    streamed: bool = False
    #: The try that used this connection before (it came from the keep-alive pool).
    previous: _Send | None = None
    #: The pooled connection was closed by the peer before any byte was written.
    stale: bool = False
    #: This try stamped ``rec.sent`` (undone when it turns out stale).
    stamped: bool = False


_current: contextvars.ContextVar[_Send | None] = contextvars.ContextVar(
    "infersight_send", default=None
)
#: Connections (their protocol objects) that have carried a request, with the last try.
_last: weakref.WeakKeyDictionary[Any, _Send] = weakref.WeakKeyDictionary()

_POLL_MASK = (select.POLLIN | getattr(select, "POLLRDHUP", 0)) if hasattr(select, "poll") else 0


def peer_closed(proto: Any) -> bool:
    """Whether an idle connection has been ended by the server (see the module doc)."""
    transport = getattr(proto, "transport", None)
    if transport is None or transport.is_closing():
        return True
    sock = transport.get_extra_info("socket")
    if sock is None:
        return False
    try:
        fd = sock.fileno()
    except (OSError, ValueError):
        return True
    if fd < 0:
        return True
    try:
        if _POLL_MASK:
            poller = select.poll()
            poller.register(fd, _POLL_MASK)
            return bool(poller.poll(0))
        readable, _, errored = select.select([fd], [], [fd], 0)
        return bool(readable or errored)
    except (OSError, ValueError):
        return True


def _no_answer(exc: BaseException) -> bool:
    """The server closed or reset the connection without answering."""
    return isinstance(exc, aiohttp.ServerDisconnectedError | aiohttp.ClientOSError)


def _stale_error(url: Any) -> StaleConnection:
    return StaleConnection(
        f"the server had closed the pooled connection to {url} before the request was written"
    )


class TimedRequest(aiohttp.ClientRequest):
    """aiohttp's request, stamping ``sent`` and refusing stale pooled connections.

    ``send`` runs once the connection is ready (so connecting is not counted), right
    before the request head is serialised. The state comes through a context variable
    set by :func:`open_response` in the same task; this costs far less than aiohttp's
    tracing signals, which it replaces. Only the first attempt stamps ``sent``
    (docs/design.md section 2: schedule lag is the client's own delay); a resend stamps it
    again, since nothing was written before.
    """

    _infersight_send: _Send | None = None

    async def send(self, conn: Any) -> aiohttp.ClientResponse:
        st = _current.get()
        proto = conn.protocol
        if st is not None and proto is not None:
            prev = st.previous = _last.get(proto)
            if prev is not None:
                prev.previous = None  # keep one step of history, not a chain
            if prev is not None and peer_closed(proto):
                st.stale = True
                raise _stale_error(self.url)
            _last[proto] = st
        if st is not None:
            self._infersight_send = st
            rec = st.rec
            if rec is not None and rec.sent is None:
                rec.sent = time.monotonic()
                st.stamped = True
        return await super().send(conn)

    async def write_bytes(self, writer: Any, conn: Any, *args: Any, **kwargs: Any) -> None:
        st = self._infersight_send
        proto = conn.protocol
        if st is not None and st.previous is not None and proto is not None and peer_closed(proto):
            # Nothing was written yet (the head goes out with the first body bytes):
            # fail the response the way aiohttp fails a write, without writing.
            st.stale = True
            proto.set_exception(_stale_error(self.url))
            return
        await super().write_bytes(writer, conn, *args, **kwargs)


async def open_response(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    *,
    data: bytes | None,
    headers: Mapping[str, str],
    rec: RequestRecord | None,
    keepalive: KeepAlive,
) -> aiohttp.ClientResponse:
    """Send a request and return its response (headers read), resending it while the
    pooled connections it is given turn out to be closed before it was written.

    Each resend is counted in ``rec.resends``; nothing else is ever sent twice here.
    """
    streamed = headers.get("Accept") == "text/event-stream"
    resends = 0
    while True:
        st = _Send(rec, streamed)
        token = _current.set(st)
        try:
            resp = await session.request(method, url, data=data, headers=headers)
        except (aiohttp.ClientError, OSError) as e:
            prev = st.previous
            if prev is not None and (st.stale or _no_answer(e)):
                keepalive.on_dropped(prev.rec, prev.streamed)
            if not st.stale or resends >= MAX_RESENDS:
                raise
        else:
            keepalive.on_response(resp, streamed)
            return resp
        finally:
            _current.reset(token)
        resends += 1
        if rec is not None:
            rec.resends += 1
            if st.stamped:
                rec.sent = None
