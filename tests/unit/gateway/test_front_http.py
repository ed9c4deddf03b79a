"""The serve front's request framing: the head parser and the chunk decoder."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.gateway.errors import InputError
from infersight.gateway.front_http import ChunkDecoder, parse_head

TCHARS = "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
token = st.text(TCHARS, min_size=1, max_size=16)
value = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=40)
target = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1,
                 max_size=60).map(lambda t: "/" + t)
SPECIAL = {"host", "content-length", "transfer-encoding", "authorization"}


@settings(max_examples=300)
@given(
    method=token, path=target, minor=st.sampled_from([0, 1]),
    headers=st.dictionaries(token.filter(lambda n: n.lower() not in SPECIAL), value,
                            max_size=8),
    length=st.integers(0, 10**12),
)
def test_well_formed_heads_parse_to_what_was_sent(
    method: str, path: str, minor: int, headers: dict[str, str], length: int
) -> None:
    lines = [f"{method} {path} HTTP/1.{minor}", "Host: 127.0.0.1", f"Content-Length: {length}"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    head = parse_head("\r\n".join(lines).encode())
    assert (head.method, head.target, head.minor, head.length) == (method, path, minor, length)
    assert not head.chunked and head.path == path.partition("?")[0]
    folded: dict[str, list[str]] = {}
    for k, v in headers.items():  # names differing only in case are one header
        folded.setdefault(k.lower(), []).append(v.strip(" \t"))
    for k, vs in folded.items():
        assert head.headers[k] == ", ".join(vs)
    assert "x-absent" not in head.headers


@settings(max_examples=500)
@given(raw=st.binary(max_size=300))
def test_any_bytes_parse_or_are_refused_with_a_4xx(raw: bytes) -> None:
    try:
        parse_head(raw)
    except InputError as e:
        assert 400 <= e.status < 500 and e.message


@pytest.mark.parametrize(
    "raw",
    [
        b"GET / HTTP/1.1",  # no Host
        b"GET / HTTP/2.0\r\nHost: a",
        b"GET  / HTTP/1.1\r\nHost: a",
        b"GET / HTTP/1.1\r\nHost: a\r\n folded: value",
        b"GET / HTTP/1.1\r\nHost: a\r\nX: a\nb",
        b"GET / HTTP/1.1\r\nHost: a\r\nX: a\x00b",
        b"GET / HTTP/1.1\r\nHost: a\r\nBad Name: x",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -5",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked",
        b"POST / HTTP/1.1\r\nHost: a\r\nHost: b",
        b"GET / HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer x\r\nauthorization: Bearer y",
        b"GET / HTTP/1.1\r\nHost: a\r\nX: a\rb",
        b"GET / HTTP/1.1\r\nHost: a\r\nX: " + b"a" * 9000,
    ],
)
def test_smuggling_and_malformed_heads_are_400_or_431(raw: bytes) -> None:
    with pytest.raises(InputError) as ei:
        parse_head(raw)
    assert ei.value.status in (400, 431)


def test_keep_alive_follows_the_version_and_connection_header() -> None:
    assert parse_head(b"GET / HTTP/1.0").close
    assert not parse_head(b"GET / HTTP/1.0\r\nConnection: keep-alive").close
    assert not parse_head(b"GET / HTTP/1.1\r\nHost: a").close
    assert parse_head(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close").close


def _chunked(body: bytes, sizes: list[int]) -> bytes:
    out, i = b"", 0
    for n in sizes:
        piece = body[i : i + n]
        if not piece:
            break
        out += b"%x;ext=1\r\n" % len(piece) + piece + b"\r\n"
        i += len(piece)
    if i < len(body):
        out += b"%X\r\n" % (len(body) - i) + body[i:] + b"\r\n"
    return out + b"0\r\nTrailer: x\r\n\r\n"


@given(
    body=st.binary(max_size=400), sizes=st.lists(st.integers(1, 64), max_size=10),
    cuts=st.lists(st.integers(1, 50), max_size=20), tail=st.binary(max_size=20),
)
def test_chunks_decode_to_the_body_however_the_bytes_arrive(
    body: bytes, sizes: list[int], cuts: list[int], tail: bytes
) -> None:
    wire = _chunked(body, sizes)
    dec = ChunkDecoder(cap=10_000)
    buf, pos, fed = bytearray(), 0, 0
    for cut in [*cuts, len(wire) + len(tail)]:  # the wire arrives in arbitrary reads
        buf += (wire + tail)[fed : fed + cut]
        fed += cut
        pos += dec.feed(buf, pos)
        if dec.done:
            break
    assert dec.done and dec.body() == body
    assert bytes(buf[pos:]) == tail[: max(0, len(buf) - len(wire))]  # the next request


@pytest.mark.parametrize(
    ("wire", "status"),
    [
        (b"zz\r\nhello\r\n0\r\n\r\n", 400),
        (b"-1\r\n", 400),
        (b"5\r\nhelloXX0\r\n\r\n", 400),
        (b"0\r\nbad trailer\r\n\r\n", 400),
        (b"ffffffffff\r\n", 413),
        (b"800\r\n" + b"x" * 0x800 + b"\r\n801\r\n", 413),  # over in total
    ],
)
def test_bad_chunks_are_refused(wire: bytes, status: int) -> None:
    with pytest.raises(InputError) as ei:
        ChunkDecoder(cap=0x1000).feed(wire, 0)
    assert ei.value.status == status


#: A header value as clients send it: visible ASCII, blanks inside and around it, and
#: latin-1 bytes past ASCII (allowed in a value, RFC 9110 obs-text).
blank_value = st.text(st.sampled_from([" ", "\t", "a", "Z", "9", ":", ",", "é", "\xff"]),
                      max_size=20)


@settings(max_examples=300)
@given(fields=st.lists(st.tuples(token.filter(lambda n: n.lower() not in SPECIAL),
                                 blank_value), max_size=12))
def test_header_values_match_a_line_by_line_reading(fields: list[tuple[str, str]]) -> None:
    """The parser splits all lines in one pass; it must read them exactly as splitting
    each line at its first colon and trimming blanks does, repeats joined in order."""
    lines = ["POST /v1/x HTTP/1.1", "Host: h"] + [f"{k}:{v}" for k, v in fields]
    head = parse_head("\r\n".join(lines).encode("latin-1"))
    expected: dict[str, str] = {"host": "h"}
    for k, v in fields:
        key = k.lower()
        expected[key] = (expected[key] + ", " if key in expected else "") + v.strip(" \t")
    assert head.headers == expected


def test_a_repeated_single_header_is_refused_however_it_is_spelled() -> None:
    for second in ("Content-Length: 5", "content-length:5", "AUTHORIZATION: b", "Host: h"):
        first = "Authorization: a" if second.lower().startswith("auth") else "Content-Length: 5"
        if second.startswith("Host"):
            first = "Host: g"
        raw = f"POST / HTTP/1.1\r\nHost: h\r\n{first}\r\n{second}".encode()
        if second.startswith("Host"):
            raw = f"POST / HTTP/1.1\r\n{first}\r\n{second}".encode()
        with pytest.raises(InputError, match="repeated"):
            parse_head(raw)


def test_an_overlong_header_line_is_431_only_when_one_line_is_over() -> None:
    ok = "x-a: " + "v" * 8000
    head = parse_head(f"GET / HTTP/1.1\r\nHost: h\r\n{ok}\r\n{ok}".encode())
    assert head.headers["x-a"] == "v" * 8000 + ", " + "v" * 8000
    with pytest.raises(InputError) as e:
        parse_head(f"GET / HTTP/1.1\r\nHost: h\r\nx-b: {'v' * 8200}".encode())
    assert e.value.status == 431
