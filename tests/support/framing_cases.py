"""Request-framing cases and h11's reading of them: the reference a server is held to.

Each case is the bytes a client sends on one connection (one request, or a request
and what a smuggler hides behind it). :func:`h11_reading` is what h11, a strict
HTTP/1.1 parser, makes of them: the bodies of the requests it accepts, in order, and
whether it then refused the rest. A server may refuse more than h11 (stricter), never
less, and the requests it does accept must have exactly h11's bodies; anything else
means the two parse the bytes differently, which is how request smuggling starts.

:func:`echo_stack` serves the gateway's HTTP stack (``gateway.listener`` and
``gateway.request_guard``) with one route that answers each request with a digest of
the body it received, and :func:`server_reading` reads its answers back.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import h11
from aiohttp import web

from infersight.gateway.listener import ClientLimits, Listener
from infersight.gateway.request_guard import RequestGuard, read_body

__all__ = ["CASES", "Reading", "echo_stack", "h11_reading", "server_reading"]

H = b"Host: x\r\n"
POST = b"POST /echo HTTP/1.1\r\n" + H
CHUNKED = POST + b"Transfer-Encoding: chunked\r\n\r\n"
NEXT = b"GET /echo HTTP/1.1\r\n" + H + b"\r\n"  # what a smuggler hides behind a request

#: name -> the bytes sent. The groups: CL.TE and TE.CL, Content-Length, chunk lines,
#: trailers, heads (obs-fold, line ends, versions), and well-formed controls.
CASES: dict[str, bytes] = {
    "ok: content-length": POST + b"Content-Length: 5\r\n\r\nhello",
    "ok: chunked": CHUNKED + b"5\r\nhello\r\n0\r\n\r\n",
    "ok: chunked with a trailer": CHUNKED + b"5\r\nhello\r\n0\r\nX-Sum: 1\r\n\r\n",
    "ok: chunk extension": CHUNKED + b"5;name=v\r\nhello\r\n0\r\n\r\n",
    "ok: two pipelined": POST + b"Content-Length: 2\r\n\r\nhi" + NEXT,
    "ok: HTTP/1.0": b"POST /echo HTTP/1.0\r\nContent-Length: 2\r\n\r\nhi",
    "CL.TE": POST
    + b"Content-Length: 13\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    + b"SMUGGLED",
    "TE.CL": POST + b"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n8\r\nSMUGGLED"
    b"\r\n0\r\n\r\n",
    "TE.TE (chunked, identity)": POST + b"Transfer-Encoding: chunked\r\n"
    b"Transfer-Encoding: identity\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "TE: identity, chunked": POST + b"Transfer-Encoding: identity, chunked\r\n\r\n"
    b"5\r\nhello\r\n0\r\n\r\n",
    "TE: chunked, identity": POST + b"Transfer-Encoding: chunked, identity\r\n\r\n"
    b"5\r\nhello\r\n0\r\n\r\n",
    "TE: xchunked": POST + b"Transfer-Encoding: xchunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "TE with a space before the colon": POST + b"Transfer-Encoding : chunked\r\n\r\n"
    b"5\r\nhello\r\n0\r\n\r\n",
    "CL duplicated, same": POST + b"Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
    "CL duplicated, different": POST + b"Content-Length: 5\r\nContent-Length: 2\r\n\r\nhello",
    "CL as a list": POST + b"Content-Length: 5, 5\r\n\r\nhello",
    "CL signed +": POST + b"Content-Length: +5\r\n\r\nhello",
    "CL signed -": POST + b"Content-Length: -5\r\n\r\nhello",
    "CL hex": POST + b"Content-Length: 0x5\r\n\r\nhello",
    "CL huge": POST + b"Content-Length: 99999999999999999999999\r\n\r\nhello",
    "bare LF in a chunk extension": CHUNKED + b"5;a\nb\r\nhello\r\n0\r\n\r\n",
    "bare LF after a chunk size": CHUNKED + b"5\nhello\r\n0\r\n\r\n",
    "bare LF after chunk data": CHUNKED + b"5\r\nhello\n0\r\n\r\n",
    "chunk size overflow": CHUNKED + b"fffffffffffffffff5\r\nhello\r\n0\r\n\r\n",
    "chunk size with 0x": CHUNKED + b"0x5\r\nhello\r\n0\r\n\r\n",
    "chunk size negative": CHUNKED + b"-5\r\nhello\r\n0\r\n\r\n",
    "chunk data longer than its size": CHUNKED + b"3\r\nhello\r\n0\r\n\r\n",
    "invalid trailer name": CHUNKED + b"5\r\nhello\r\n0\r\nBad Name: x\r\n\r\n",
    "trailer without a colon": CHUNKED + b"5\r\nhello\r\n0\r\nnocolon\r\n\r\n",
    "obs-fold": b"GET /echo HTTP/1.1\r\n" + H + b"X-A: one\r\n two\r\n\r\n",
    "obs-fold of Content-Length": POST + b"Content-Length:\r\n 5\r\n\r\nhello",
    "bare LF line ends in the head": b"GET /echo HTTP/1.1\n" + b"Host: x\n\n",
    "bare CR in a header value": b"GET /echo HTTP/1.1\r\n" + H + b"X-A: a\rb\r\n\r\n",
    "NUL in a header value": b"GET /echo HTTP/1.1\r\n" + H + b"X-A: a\x00b\r\n\r\n",
    "space before a header colon": b"GET /echo HTTP/1.1\r\nHost : x\r\n\r\n",
    "HTTP/0.9 request line": b"GET /echo\r\n\r\n",
    "HTTP/2.0 request line": b"GET /echo HTTP/2.0\r\n" + H + b"\r\n",
    "HTTP/1.2 request line": b"GET /echo HTTP/1.2\r\n" + H + b"\r\n",
    "lower-case version": b"GET /echo http/1.1\r\n" + H + b"\r\n",
    "no Host in HTTP/1.1": b"GET /echo HTTP/1.1\r\n\r\n",
    "two Host headers": b"GET /echo HTTP/1.1\r\n" + H + b"Host: y\r\n\r\n",
    "garbage request line": b"GARBAGE\r\n\r\n",
}


@dataclass
class Reading:
    """How one parser read a case: the bodies of the requests it accepted, in order,
    and whether it refused what followed."""

    bodies: list[bytes] = field(default_factory=list)
    refused: bool = False
    #: The answers' statuses, for a server (h11 gives none).
    statuses: list[int] = field(default_factory=list)


def h11_reading(raw: bytes) -> Reading:
    """h11 as the server: every complete request and its body, until it refuses or
    needs more bytes."""
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(raw)
    out = Reading()
    body = b""
    try:
        while True:
            ev = conn.next_event()
            if ev is h11.NEED_DATA or ev is h11.PAUSED:
                return out
            if isinstance(ev, h11.Data):
                body += ev.data
            elif isinstance(ev, h11.EndOfMessage):
                out.bodies.append(body)
                body = b""
                conn.send(h11.Response(status_code=200, headers=[("Content-Length", "0")]))
                conn.send(h11.EndOfMessage())
                if conn.their_state is not h11.DONE or conn.our_state is not h11.DONE:
                    return out  # HTTP/1.0 or Connection: close: nothing more is read
                conn.start_next_cycle()
    except h11.RemoteProtocolError:
        out.refused = True
        return out


def digest(body: bytes) -> bytes:
    return hashlib.sha256(body).hexdigest()[:16].encode()


@contextlib.asynccontextmanager
async def echo_stack(limits: ClientLimits) -> AsyncIterator[int]:
    """The gateway's HTTP stack with one route, ``/echo``: 200 and the digest of the
    body each request carried. Yields the port."""

    async def echo(request: web.Request) -> web.Response:
        return web.Response(body=digest(await read_body(request, limits)))

    guard = RequestGuard(limits, lambda r: None, lambda: {"X-Request-Id": "framing"})
    app = web.Application(middlewares=[guard.middleware])
    guard.add_routes(app, "/echo", {"GET": echo, "POST": echo})
    guard.add_catch_all(app)
    listener = Listener(app, limits)
    await listener.start("127.0.0.1", 0)
    try:
        assert listener.port is not None
        yield listener.port
    finally:
        await listener.stop()


def _send(port: int, raw: bytes, wait: float) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        sock.sendall(raw)
        got = b""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                piece = sock.recv(65536)
            except (TimeoutError, OSError):
                break
            if not piece:
                break
            got += piece
        return got


async def server_reading(port: int, raw: bytes, *, wait: float = 3.0) -> Reading:
    """Send ``raw`` on a new connection; read every answer until the server closes it
    (or ``wait`` passes): each 200's body is the digest of a body the server accepted;
    any other answer, or a close before the bytes were all answered, is a refusal."""
    got = await asyncio.to_thread(_send, port, raw, wait)
    client = h11.Connection(h11.CLIENT)
    client.receive_data(got)
    client.receive_data(b"")
    out = Reading()
    while True:
        client.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
        client.send(h11.EndOfMessage())
        status, body = None, b""
        try:
            while True:
                ev = client.next_event()
                if isinstance(ev, h11.Response):
                    status = ev.status_code
                elif isinstance(ev, h11.Data):
                    body += ev.data
                elif isinstance(ev, h11.EndOfMessage | h11.ConnectionClosed) or ev in (
                    h11.NEED_DATA,
                    h11.PAUSED,
                ):
                    break
        except h11.RemoteProtocolError:
            status = None
        if status is None:
            return out
        out.statuses.append(status)
        if status == 200:
            out.bodies.append(body)
        else:
            out.refused = True
            return out
        if client.our_state is not h11.DONE or client.their_state is not h11.DONE:
            return out
        client.start_next_cycle()
