"""Raw HTTP for tests of servers' edges: send exact bytes, read one answer.

Clients such as aiohttp or the ``openai`` package only ever send well-formed requests;
tests of how a server treats malformed framing, oversize bodies or slow clients need
to put arbitrary bytes on the wire and still read the answer (parsed by the standard
library's HTTP response reader: status, headers, a body framed by length or chunks).
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import time
from dataclasses import dataclass, field

__all__ = ["RawAnswer", "exchange_raw", "request_bytes", "send_raw"]


@dataclass
class RawAnswer:
    """One HTTP answer as read off the socket."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)  # lower-case names
    body: bytes = b""
    #: Seconds from the last byte sent to the answer's head.
    seconds: float = 0.0


def request_bytes(
    method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> bytes:
    """A well-formed HTTP/1.1 request (Host and Content-Length added when missing)."""
    h = {"Host": "127.0.0.1", **(headers or {})}
    if body and "Content-Length" not in h and "Transfer-Encoding" not in h:
        h["Content-Length"] = str(len(body))
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items())
    return head.encode("latin-1") + b"\r\n" + body


def _read(sock: socket.socket, method: str, sent_at: float) -> RawAnswer | None:
    resp = http.client.HTTPResponse(sock, method=method)
    try:
        resp.begin()
    except (http.client.RemoteDisconnected, ConnectionError, TimeoutError):
        return None
    seconds = time.monotonic() - sent_at
    try:
        body = resp.read()
    except http.client.IncompleteRead as e:
        body = e.partial
    headers = {k.lower(): v for k, v in resp.getheaders()}
    return RawAnswer(resp.status, headers, body, seconds)


def exchange_raw(
    sock: socket.socket, data: bytes, *, method: str = "POST", half_close: bool = False
) -> RawAnswer | None:
    """Send ``data`` on an open socket and read one answer (None: closed unanswered).

    A server may refuse before it read everything (413 on the head): a failed send is
    ignored and the answer read anyway. ``half_close`` ends the sending side after
    ``data``, so an incomplete request meets end-of-file instead of a timeout.
    """
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        sock.sendall(data)
    if half_close:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)
    return _read(sock, method, time.monotonic())


def send_raw(
    host: str, port: int, data: bytes, *, method: str = "POST", half_close: bool = True,
    timeout: float = 30.0,
) -> RawAnswer | None:
    """:func:`exchange_raw` on a new connection, closed afterwards."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        return exchange_raw(sock, data, method=method, half_close=half_close)
