"""A raw-socket HTTP/1.1 client for testing servers against slow and malformed clients.

Real clients cannot send a garbage request line, a negative Content-Length or a head
that arrives a byte a minute; this one sends exactly the bytes it is given, with pauses
between them, and reads back one answer::

    ans = exchange("127.0.0.1", port, [b"POST /v1/chat/completions HTTP/1.1\\r\\n", 2.0,
                                       b"Host: x\\r\\n\\r\\n"])
    ans.status, ans.headers["content-type"], ans.json(), ans.elapsed, ans.closed

``half_close`` ends the sending side after the last part, so an incomplete request
meets end-of-file instead of a timeout; :func:`exchange_on` does the same on a socket
the caller holds (keep-alive and pipelining tests). ``head=True`` reads the answer to a
HEAD request (a head without a body).

It is blocking (plain sockets): call it from a thread in async tests.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["RawAnswer", "exchange", "exchange_on", "request_bytes"]


@dataclass(slots=True)
class RawAnswer:
    """What came back: ``status`` None when the server closed without answering."""

    status: int | None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    #: Seconds from the first byte sent to the end of the answer (or the close).
    elapsed: float = 0.0
    #: The server closed the connection after (or instead of) answering.
    closed: bool = False

    def json(self) -> Any:
        return orjson.loads(self.body)


def request_bytes(
    method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> bytes:
    """A well-formed request (Host and Content-Length added), to be cut or corrupted."""
    h = {"Host": "localhost", **(headers or {})}
    if (body or method == "POST") and "Transfer-Encoding" not in h:
        h.setdefault("Content-Length", str(len(body)))
    head = f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in h.items())
    return head.encode("latin-1") + b"\r\n" + body


def _read_until(sock: socket.socket, buf: bytearray, marker: bytes, deadline: float) -> bool:
    while marker not in buf:
        if not _recv(sock, buf, deadline):
            return False
    return True


def _recv(sock: socket.socket, buf: bytearray, deadline: float) -> bool:
    left = deadline - time.monotonic()
    if left <= 0:
        return False
    sock.settimeout(left)
    try:
        data = sock.recv(65536)
    except (TimeoutError, OSError):
        return False
    buf += data
    return bool(data)


def _body(sock: socket.socket, buf: bytearray, headers: dict[str, str], deadline: float) -> bytes:
    if "content-length" in headers:
        n = int(headers["content-length"])
        while len(buf) < n and _recv(sock, buf, deadline):
            pass
        return bytes(buf[:n])
    if "chunked" in headers.get("transfer-encoding", ""):
        out = bytearray()
        while _read_until(sock, buf, b"\r\n", deadline):
            line, _, rest = bytes(buf).partition(b"\r\n")
            size = int(line.split(b";")[0] or b"0", 16)
            while len(rest) < size + 2 and _recv(sock, buf, deadline):
                rest = bytes(buf).partition(b"\r\n")[2]
            if size == 0:
                break
            out += rest[:size]
            del buf[: len(line) + 2 + size + 2]
        return bytes(out)
    while _recv(sock, buf, deadline):  # up to the close
        pass
    return bytes(buf)


def exchange(
    host: str,
    port: int,
    parts: Sequence[bytes | float],
    *,
    timeout: float = 10.0,
    half_close: bool = False,
    head: bool = False,
) -> RawAnswer:
    """Send ``parts`` (bytes are written, numbers are pauses in seconds) on a new
    connection and read one answer; stop waiting ``timeout`` seconds after the last
    part was sent."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        return exchange_on(sock, parts, timeout=timeout, half_close=half_close, head=head)


def exchange_on(
    sock: socket.socket,
    parts: Sequence[bytes | float],
    *,
    timeout: float = 10.0,
    half_close: bool = False,
    head: bool = False,
) -> RawAnswer:
    """:func:`exchange` on an open connection, which stays open for the next one (with
    the timeout it had)."""
    before = sock.gettimeout()
    try:
        return _exchange(sock, parts, timeout=timeout, half_close=half_close, head=head)
    finally:
        sock.settimeout(before)


def _exchange(
    sock: socket.socket,
    parts: Sequence[bytes | float],
    *,
    timeout: float,
    half_close: bool,
    head: bool,
) -> RawAnswer:
    t0 = time.monotonic()
    for part in parts:
        if isinstance(part, int | float):
            time.sleep(part)
            continue
        with contextlib.suppress(OSError):  # the server may have closed already
            sock.sendall(part)
    if half_close:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)
    buf = bytearray()
    deadline = time.monotonic() + timeout
    while True:
        if not _read_until(sock, buf, b"\r\n\r\n", deadline):
            return RawAnswer(None, elapsed=time.monotonic() - t0, closed=not _open(sock))
        top, _, rest = bytes(buf).partition(b"\r\n\r\n")
        lines = top.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        if status >= 200:
            break
        buf = bytearray(rest)  # an interim answer (100 Continue): the real one follows
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    body = b"" if head else _body(sock, bytearray(rest), headers, deadline)
    closed = headers.get("connection", "").lower() == "close" or not _open(sock)
    return RawAnswer(status, headers, body, time.monotonic() - t0, closed)


def _open(sock: socket.socket) -> bool:
    """Whether the server keeps the connection open (nothing more and no close)."""
    sock.settimeout(0.05)
    try:
        return sock.recv(1, socket.MSG_PEEK) != b""
    except TimeoutError:
        return True
    except OSError:
        return False
