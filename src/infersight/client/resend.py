"""The resend rule (docs/design.md section 3): a request goes out again, without counting
an attempt, only when it provably never reached the server.

A keep-alive pool holds connections that the server may close while they are idle.
llama.cpp's HTTP server, for one, announces ``Keep-Alive`` and then closes the
connection right after every streamed answer (:mod:`.keepalive`). The next request that
takes such a connection from the pool would fail, although the server never read a byte
of it.

Proof that the server cannot have read the request: no byte of it was written, and at
the last moment before the write the pooled connection is already closed by the peer.
"Closed" is what the event loop knows (the transport is closing or gone) or what the
kernel knows and the loop has not processed yet: an idle HTTP/1.1 connection has
nothing to read, so a readable socket means the server's FIN, a reset, or bytes it sent
unasked, all of which end the connection.

:class:`ResendConnector` checks that when aiohttp takes a connection for a request
(its public ``connect``, right before the request is written): a pooled connection the
server closed is dropped and the next one taken (or a new one opened), and the request
counts one resend in ``RequestRecord.resends``. Anything else (a reset or an EOF after
the request was written) may have reached the server: that is a ResetError for the
retry policy. aiohttp itself sends an idempotent request (GET) once more when a reused
connection breaks after the write; :func:`open_response` turns that failure into one
aiohttp does not retry, so the client's policy alone decides.

The request's state reaches the connector through a context variable set by
:func:`open_response` in the same task. ``sent`` is stamped there too: once the
connection is ready, right before the write (docs/design.md section 2).
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

__all__ = ["MAX_RESENDS", "ResendConnector", "SentThenDropped", "open_response", "peer_closed"]

#: A safety bound only: each resend closes one pooled connection, so the pool runs dry
#: and a new connection (never resent) is used long before this.
MAX_RESENDS = 100

#: The methods aiohttp sends once more by itself when a reused connection breaks.
_AIOHTTP_RETRIES = frozenset({"GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE"})


class SentThenDropped(aiohttp.ClientConnectionError):
    """The server closed the connection after the request was written, without an
    answer. Not one of the errors aiohttp retries by itself: the client's policy decides."""


@dataclass(slots=True)
class _Send:
    """One request going out: what the connector needs and finds out."""

    rec: RequestRecord | None
    keepalive: KeepAlive
    #: The request asks for a streamed answer (SSE).
    streamed: bool = False
    #: The request that used the connection this one got, when it came from the pool.
    previous: _Send | None = None


_current: contextvars.ContextVar[_Send | None] = contextvars.ContextVar(
    "infersight_send", default=None
)
#: Connections (their protocol objects) that have carried a request, with the last one.
_last: weakref.WeakKeyDictionary[Any, _Send] = weakref.WeakKeyDictionary()

_POLL_MASK = (select.POLLIN | getattr(select, "POLLRDHUP", 0)) if hasattr(select, "poll") else 0


def peer_closed(transport: Any) -> bool:
    """Whether an idle connection has been ended by the server (see the module doc)."""
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


class ResendConnector(aiohttp.TCPConnector):
    """aiohttp's connector, handing out no pooled connection the server has closed
    or is known to close (after a streamed answer)."""

    async def connect(
        self, req: aiohttp.ClientRequest, traces: list[Any], timeout: aiohttp.ClientTimeout
    ) -> Any:
        st = _current.get()
        resends = 0
        while True:
            conn = await super().connect(req, traces, timeout)
            proto = conn.protocol
            if st is None or proto is None:
                return conn
            prev = _last.get(proto)
            if prev is not None and prev.streamed and st.keepalive.closes_after_stream:
                # The server closes such a connection: never write into it. A short
                # answer can end (and aiohttp pool its connection) before the client
                # learns this from its headers and marks the connection to close.
                conn.close()
                continue
            if prev is not None and resends < MAX_RESENDS and peer_closed(conn.transport):
                # Closed by the server before any byte of this request was written.
                conn.close()
                st.keepalive.on_dropped(prev.rec, prev.streamed)
                resends += 1
                if st.rec is not None:
                    st.rec.resends += 1
                continue
            st.previous = prev
            _last[proto] = st
            rec = st.rec
            if rec is not None and rec.sent is None:
                rec.sent = time.monotonic()  # the first attempt's write, right after this
            return conn


def _no_answer(exc: BaseException) -> bool:
    """The server closed or reset the connection without answering."""
    return isinstance(
        exc, aiohttp.ServerDisconnectedError | aiohttp.ClientOSError | SentThenDropped
    )


async def _no_silent_retry(
    req: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
) -> aiohttp.ClientResponse:
    """A client middleware: a broken connection after the write is not retried by
    aiohttp (it may have reached the server; the retry policy decides)."""
    try:
        return await handler(req)
    except aiohttp.ClientConnectorError:
        raise  # nothing was sent (aiohttp does not retry these either)
    except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as e:
        raise SentThenDropped(f"{req.url} closed the connection without an answer: {e}") from e


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
    """Send a request and return its response (headers read); the session's
    :class:`ResendConnector` resends it while the pooled connections it is given turn
    out to be closed before it was written (each counted in ``rec.resends``)."""
    streamed = headers.get("Accept") == "text/event-stream"
    st = _Send(rec, keepalive, streamed)
    token = _current.set(st)
    mw = (_no_silent_retry,) if method in _AIOHTTP_RETRIES else None
    try:
        resp = await session.request(method, url, data=data, headers=headers, middlewares=mw)
    except (aiohttp.ClientError, OSError) as e:
        prev = st.previous
        if prev is not None and _no_answer(e):
            keepalive.on_dropped(prev.rec, prev.streamed)
        raise
    finally:
        _current.reset(token)
        # ``previous`` is needed only while this request is being sent. Kept, it would
        # chain every request a keep-alive connection ever carried (``_last`` holds the
        # newest, which held the one before...): memory growing with each request.
        st.previous = None
    keepalive.on_response(resp, streamed)
    return resp
