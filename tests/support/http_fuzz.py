"""Hypothesis strategies for fuzzing an OpenAI-compatible HTTP server, and the check
every answer must pass: never a 5xx, and every error a JSON ``{"error": {...}}``.

Two families: request *bodies* (any JSON, and near-valid chat/completions/embeddings
requests with wrongly typed fields) sent with correct framing, and raw *framing*
(request lines, headers, Content-Length and chunked bodies, garbage bytes) sent over a
plain socket. Needs the ``dev`` extra (hypothesis). Used by the gateway's and
``infersight serve``'s fuzz tests::

    @given(raw=raw_requests())
    def test_framing(raw): check_answer(exchange(host, port, [raw], timeout=5))
"""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import strategies as st

from support.raw_http import RawAnswer

__all__ = ["PATHS", "check_answer", "json_bodies", "raw_requests", "request_bodies"]

PATHS = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings")

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=24)
)
json_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=12,
)
_messages = st.lists(
    st.fixed_dictionaries(
        {"content": st.one_of(st.text(max_size=40), json_values)},
        optional={"role": st.one_of(st.sampled_from(["user", "system", "assistant"]), json_values)},
    ),
    max_size=3,
)


def request_bodies(model: str) -> st.SearchStrategy[dict[str, Any]]:
    """Near-valid request bodies: right and wrong types in each field the API has."""
    return st.fixed_dictionaries(
        {"model": st.one_of(st.just(model), json_values)},
        optional={
            "messages": st.one_of(_messages, json_values),
            "prompt": st.one_of(
                st.text(max_size=40), st.lists(st.integers(0, 50000), max_size=8), json_values
            ),
            "input": st.one_of(
                st.text(max_size=40), st.lists(st.text(max_size=10), max_size=4), json_values
            ),
            "stream": st.one_of(st.booleans(), json_values),
            "stream_options": st.one_of(st.just({"include_usage": True}), json_values),
            "max_tokens": st.one_of(st.integers(-5, 10**9), json_values),
            "temperature": st.one_of(st.floats(0, 2), json_values),
            "n": st.one_of(st.integers(-2, 4), json_values),
        },
    )


def json_bodies(model: str) -> st.SearchStrategy[bytes]:
    """Body bytes: near-valid requests, any JSON, or not JSON at all."""
    return st.one_of(
        request_bodies(model).map(orjson.dumps),
        json_values.map(orjson.dumps),
        st.binary(max_size=64),
        st.text(max_size=64).map(lambda t: t.encode("utf-8", "surrogatepass")),
    )


_methods = st.sampled_from(
    [b"POST", b"GET", b"PUT", b"DELETE", b"OPTIONS", b"PATCH", b"P\x00ST", b"post", b""]
)
_paths = st.one_of(
    st.sampled_from(
        [p.encode() for p in PATHS]
        + [
            b"/health",
            b"/",
            b"*",
            b"/v1/models",
            b"/%zz",
            b"/v1/chat/completions?x=%ff",
            b"//..//etc",
        ]
    ),
    st.binary(max_size=16),
)
_versions = st.sampled_from([b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2.0", b"HTTP/1.1x", b"HTTP/9", b""])
_header_names = st.sampled_from(
    [
        b"Content-Type",
        b"X-Request-Id",
        b"Authorization",
        b"Accept",
        b"Connection",
        b"X-Infersight-Deadline-Ms",
        b"X-Infersight-Priority",
        b"Bad Name",
        b"\x01",
        b"",
    ]
)
_header_values = st.one_of(
    st.sampled_from(
        [b"application/json", b"close", b"keep-alive", b"-1", b"0", b"nan", b"Bearer x", b"100"]
    ),
    st.binary(max_size=24).filter(lambda b: b"\r" not in b and b"\n" not in b),
)


@st.composite
def _framed_body(draw: st.DrawFn, body: bytes) -> tuple[list[bytes], bytes]:
    """(extra header lines, body bytes) for one way of framing ``body``."""
    how = draw(
        st.sampled_from(
            [
                "length",
                "length",
                "none",
                "chunked",
                "bad_chunk",
                "bad_length",
                "long_length",
                "short_length",
                "both",
            ]
        )
    )
    n = len(body)
    if how == "length":
        return [b"Content-Length: %d" % n], body
    if how == "none":
        return [], body
    if how in ("chunked", "both"):
        cut = draw(st.integers(0, n))
        parts = [p for p in (body[:cut], body[cut:]) if p]
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"
        extra = [b"Content-Length: %d" % n] if how == "both" else []
        return [b"Transfer-Encoding: chunked", *extra], chunks
    if how == "bad_chunk":
        size = draw(st.sampled_from([b"zz", b"-1", b"", b"1" * 20, b"0x10", b"4;ext\x00"]))
        return [b"Transfer-Encoding: chunked"], size + b"\r\n" + body + b"\r\n0\r\n\r\n"
    if how == "bad_length":
        value = draw(
            st.sampled_from([b"-5", b"abc", b"1e3", b"99999999999999999999999", b"5, 6", b" "])
        )
        return [b"Content-Length: " + value], body
    if how == "long_length":  # more promised than sent: the body timeout must end it
        return [b"Content-Length: %d" % (n + draw(st.integers(1, 50)))], body
    return [b"Content-Length: %d" % max(0, n - draw(st.integers(1, 20)))], body


@st.composite
def raw_requests(draw: st.DrawFn, model: str = "fake") -> bytes:
    """A request's raw bytes: mostly well-formed lines around broken framing, or garbage."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(min_size=1, max_size=200))
    body = draw(json_bodies(model))
    framing, data = draw(_framed_body(body))
    headers = [b"Host: localhost", *framing]
    for name, value in draw(st.lists(st.tuples(_header_names, _header_values), max_size=4)):
        headers.append(name + b": " + value)
    line = draw(_methods) + b" " + draw(_paths) + b" " + draw(_versions)
    return line + b"\r\n" + b"\r\n".join(headers) + b"\r\n\r\n" + data


def check_answer(ans: RawAnswer, *, head: bool = False) -> None:
    """The server's answer to anything: no 5xx, and an error is OpenAI-shaped JSON.

    ``ans.status`` None (the server closed without answering) fails too: a server
    answers even a request it cannot parse, or one that stalls (after its timeout).
    """
    assert ans.status is not None, "the connection closed without an answer"
    assert ans.status < 500, (ans.status, ans.body[:300])
    if ans.status >= 400 and not head:
        assert ans.headers.get("content-type", "").startswith("application/json"), ans
        err = orjson.loads(ans.body)["error"]
        assert isinstance(err, dict) and isinstance(err.get("message"), str), ans.body
        assert {"type", "code"} <= set(err), ans.body
