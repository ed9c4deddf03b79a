"""HTTP/1.1 request framing for the serve front: a strict head parser and chunk decoder.

Why not aiohttp's parser: it sits on every request of ``infersight serve`` and builds
objects the front never uses (a multidict, a URL, a payload stream); on the 2-core dev
box it cost 76 us of the front's budget of 200 per request (``feed_data`` and the payload
read), this parser under 10. It is deliberately narrow: anything but clean HTTP/1.0 or
1.1 is refused with a 4xx (RFC 9112): a bad request line or header line, obs-fold, bare
LF, control characters, a repeated or non-numeric Content-Length, a Transfer-Encoding
other than ``chunked``, both Content-Length and Transfer-Encoding (the request smuggling
pattern), a head or line over the limits. Nothing of the client's head is passed on:
the front writes the engine's request itself (method, path, body), so a framing quirk
can never reach llama.cpp's parser.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from infersight.gateway.errors import InputError

__all__ = ["MAX_HEAD_BYTES", "ChunkDecoder", "Head", "parse_head"]

#: The largest request head (request line and headers), like nginx's 4 x 8k buffers.
MAX_HEAD_BYTES = 32 * 1024
#: The longest line of a head (aiohttp's and nginx's 8k).
MAX_LINE_BYTES = 8190
_MAX_HEADERS = 100
_MAX_CHUNK_LINE = 1024

_TCHAR = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]"
#: A request line's method and target, then its version.
_METHOD_TARGET = rb"(" + _TCHAR + rb"+) ([\x21-\x7e]+) HTTP/"
_REQUEST_LINE = re.compile(_METHOD_TARGET + rb"(\d)\.(\d)")
#: The header lines, each ``token ":" value CRLF``; a value has no control character
#: but TAB (so no bare CR or LF, and no obs-fold). One pass in C for the whole block.
_HEADER_LINE = _TCHAR + rb"+:[\t\x20-\x7e\x80-\xff]*"
_HEADER_BLOCK = re.compile(rb"(?:" + _HEADER_LINE + rb"\r\n)*" + _HEADER_LINE)
#: A clean head whole: the request line (HTTP/1.0 or 1.1), then header lines.
_CLEAN_HEAD = re.compile(_METHOD_TARGET + rb"1\.([01])((?:\r\n" + _HEADER_LINE + rb")*)")
#: One header line of a clean head's block: its name, and its value without the
#: blanks around it.
_FIELD = re.compile(r"\r\n([^:]+):[ \t]*((?:[^\r\n]*[^ \t\r\n])?)[ \t]*")
_VALUE = re.compile(rb"[\t\x20-\x7e\x80-\xff]*")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
#: Headers that must not repeat: a second copy is how requests get smuggled, or how
#: two parties read two different keys.
_SINGLE = frozenset({"content-length", "transfer-encoding", "host", "authorization"})


def _bad(message: str, status: int = 400, code: str = "malformed_http") -> InputError:
    return InputError(f"malformed HTTP request: {message}", code=code, status=status)


@dataclass(slots=True)
class Head:
    """A parsed request head."""

    method: str
    target: str
    minor: int  # HTTP/1.<minor>
    headers: dict[str, str]  # lower-case names; a repeated header's values joined by ", "
    #: Body framing: ``length`` bytes, or chunked (then length is 0).
    length: int
    chunked: bool
    #: The target without its query (computed once: every step of a request reads it).
    path: str = field(init=False)
    #: Whether a body follows the head.
    has_body: bool = field(init=False)

    def __post_init__(self) -> None:
        self.path = self.target.partition("?")[0]
        self.has_body = self.chunked or self.length > 0

    @property
    def close(self) -> bool:
        """Whether the client asked to close after this request."""
        conn = self.headers.get("connection", "").lower()
        if self.minor == 0:
            return "keep-alive" not in conn
        return "close" in conn


def parse_head(raw: bytes) -> Head:
    """Parse a request head (without its final blank line); raise InputError (4xx)."""
    # A clean head (the usual one) is checked whole by one match and split by one
    # findall, both in C: a request arrives after an engine step has evicted the front
    # from the CPU's caches, and then each distinct operation costs microseconds. Any
    # other head (a repeat, a bad line, one over the limits) takes the line-by-line
    # reading, which says what is wrong.
    m = _CLEAN_HEAD.fullmatch(raw) if len(raw) <= MAX_LINE_BYTES else None
    if m is not None:
        method, target, minor_text, block = m.groups()
        pairs = _FIELD.findall(block.decode("latin-1"))
        headers = {name.lower(): value for name, value in pairs}
        if len(headers) == len(pairs) <= _MAX_HEADERS:
            return _framed(method, target, minor_text, headers)
    return _parse_lines(raw)


def _parse_lines(raw: bytes) -> Head:
    eol = raw.find(b"\r\n")
    line = raw if eol < 0 else raw[:eol]
    if len(line) > MAX_LINE_BYTES:
        raise _bad("request line too long", 431, "header_too_large")
    m = _REQUEST_LINE.fullmatch(line)
    if m is None:
        raise _bad("invalid request line")
    if m.group(3) != b"1" or m.group(4) not in (b"0", b"1"):
        raise _bad("only HTTP/1.0 and HTTP/1.1 are served")
    headers: dict[str, str] = {}
    if eol >= 0:
        # The whole block checked in one pass (in C), then split as text.
        if _HEADER_BLOCK.fullmatch(raw, eol + 2) is None:
            raise _bad("invalid header line, or a control character in one")
        lines = raw[eol + 2 :].decode("latin-1").split("\r\n")
        if len(lines) > _MAX_HEADERS:
            raise _bad("too many header lines", 431, "header_too_large")
        for text in lines:
            if len(text) > MAX_LINE_BYTES:
                raise _bad("a header line is too long", 431, "header_too_large")
            name, _, value = text.partition(":")
            key = name.lower()
            if key in headers:
                if key in _SINGLE:
                    raise _bad(f"repeated {key} header")
                headers[key] += ", " + value.strip(" \t")
            else:
                headers[key] = value.strip(" \t")
    return _framed(m.group(1), m.group(2), m.group(4), headers)


def _framed(method: bytes, target: bytes, minor_text: bytes, headers: dict[str, str]) -> Head:
    """The head, once its lines are read: the Host and body-framing rules."""
    minor = 1 if minor_text == b"1" else 0
    if minor == 1 and "host" not in headers:
        raise _bad("HTTP/1.1 requires a Host header")
    length, chunked = 0, False
    te = headers.get("transfer-encoding")
    if te is not None:
        if te.lower() != "chunked" or minor == 0:
            raise _bad(f"unsupported Transfer-Encoding: {te[:40]}", 400)
        if "content-length" in headers:
            raise _bad("both Content-Length and Transfer-Encoding")
        chunked = True
    else:
        cl = headers.get("content-length")
        if cl is not None:
            if not cl.isascii() or not cl.isdigit() or len(cl) > 18:
                raise _bad("invalid Content-Length")
            length = int(cl)
    return Head(method.decode("ascii"), target.decode("ascii"), minor, headers, length,
                chunked)


class ChunkDecoder:
    """Decodes a chunked body as it arrives; ``feed`` returns how many bytes it used."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.parts: list[bytes] = []
        self.size = 0
        self.done = False
        self._left = 0  # data bytes left in the current chunk
        self._crlf = False  # the CRLF after a chunk's data is due
        self._trailers = False

    def feed(self, buf: bytes | bytearray, pos: int) -> int:
        """Consume from ``buf[pos:]``; raise InputError on bad framing or over the cap."""
        start, n = pos, len(buf)
        while pos < n and not self.done:
            if self._left:
                take = min(self._left, n - pos)
                self.parts.append(bytes(buf[pos : pos + take]))
                pos += take
                self._left -= take
                self._crlf = self._left == 0
                continue
            if self._crlf:
                if n - pos < 2:
                    break
                if buf[pos : pos + 2] != b"\r\n":
                    raise _bad("chunk data not followed by CRLF")
                pos += 2
                self._crlf = False
                continue
            eol = buf.find(b"\r\n", pos, pos + _MAX_CHUNK_LINE)
            if eol < 0:
                if n - pos >= _MAX_CHUNK_LINE:
                    raise _bad("chunk size line too long")
                break
            line = bytes(buf[pos:eol])
            pos = eol + 2
            if self._trailers:
                if not line:
                    self.done = True
                elif _VALUE.fullmatch(line) is None or b":" not in line:
                    raise _bad("invalid trailer line")
                continue
            size_text = line.split(b";", 1)[0].rstrip(b" \t")
            if _HEX.fullmatch(size_text) is None:
                raise _bad("invalid chunk size")
            size = int(size_text, 16)
            if size == 0:
                self._trailers = True
                continue
            self.size += size
            if self.size > self.cap:
                raise InputError(f"request body exceeds {self.cap} bytes",
                                 code="body_too_large", status=413)
            self._left = size
        return pos - start

    def body(self) -> bytes:
        return b"".join(self.parts)
