"""Fuzz `infersight serve`'s public port: bodies and raw HTTP framing (Hypothesis).

Against a real `infersight serve` process: whatever arrives, the answer is never a
5xx, an error is always an OpenAI JSON error body, and the engine is healthy after.
Bounded for CI (a few dozen examples each, every generation at most 3 tokens).
"""

from __future__ import annotations

import json
import re
import urllib.request
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
from hypothesis import HealthCheck, assume, event, example, given, settings
from hypothesis import strategies as st
from test_engine_serve_cli import Served, _start

from support.http_fuzz import check_answer, raw_requests
from support.raw_http import RawAnswer, exchange, request_bytes

pytestmark = [pytest.mark.engine, pytest.mark.slow]

MODEL = "SmolLM2-135M-Instruct"
FUZZ = settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    database=None,
)


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    s = _start(
        "--port",
        "0",
        "--parallel",
        "2",
        "--ctx",
        "1024",
        INFERSIGHT_SERVE_HEADER_TIMEOUT_S="2",
        INFERSIGHT_SERVE_BODY_TIMEOUT_S="2",
        INFERSIGHT_SERVE_MAX_BODY_BYTES="65536",
    )
    yield s
    s.stop()


def check(ans: RawAnswer, head_only: bool = False) -> None:
    """The fuzz tests' one check (never a 5xx, errors as OpenAI JSON), as for the gateway."""
    event(f"status {ans.status}")  # --hypothesis-show-statistics: what the fuzz reached
    check_answer(ans, head=head_only)


def send(served: Served, data: bytes, *, head: bool = False) -> RawAnswer:
    # A cut request is answered at the 2 s head or body limit.
    return exchange("127.0.0.1", served.port, [data], timeout=60, head=head)


# -- bodies -----------------------------------------------------------------------------------
json_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False),
    st.text(max_size=20),
)
json_value = st.recursive(
    json_scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
text = st.text(max_size=24)
function = st.fixed_dictionaries(
    {"name": st.sampled_from(["get_weather", "f"]) | json_value},
    optional={
        "parameters": st.just({"type": "object", "properties": {"x": {"type": "string"}}})
        | json_value,
        "description": text | json_value,
        "arguments": text | json_value,
    },
)
tool_call = st.fixed_dictionaries(
    {"type": st.just("function") | json_value, "function": function | json_value},
    optional={"id": text | json_value},
)
message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "system", "assistant", "tool", "developer"]) | json_value},
    optional={
        "content": text
        | st.none()
        | st.lists(
            st.fixed_dictionaries(
                {"type": st.sampled_from(["text", "image_url"])},
                optional={"text": text | json_value, "image_url": json_value},
            ),
            max_size=2,
        )
        | json_value,
        "name": text | json_value,
        "tool_calls": st.lists(tool_call, max_size=2) | json_value,
        "tool_call_id": text | json_value,
        "reasoning_content": text | json_value,
    },
)
schema = st.just({"type": "object", "properties": {"a": {"type": "integer"}}}) | json_value
#: Per field: plausible values, valid and not. Generation stays short: a max_tokens the
#: engine accepts is at most 3 (an unlimited body gets max_tokens 1 before it is sent).
FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "model": st.just(MODEL) | json_value,
    "messages": st.lists(message, max_size=3) | json_value,
    "prompt": text
    | st.lists(st.integers(-5, 60000), max_size=4)
    | st.lists(text, max_size=2)
    | json_value,
    "max_tokens": st.integers(-3, 3) | json_value,
    "max_completion_tokens": st.integers(-3, 3) | json_value,
    "stream": st.booleans() | json_value,
    "stream_options": st.fixed_dictionaries({}, optional={"include_usage": st.booleans()})
    | json_value,
    "n": st.integers(-1, 2) | json_value,
    "temperature": st.floats(-1, 3) | json_value,
    "top_p": st.floats(-1, 2) | json_value,
    "presence_penalty": st.floats(-3, 3) | json_value,
    "frequency_penalty": st.floats(-3, 3) | json_value,
    "stop": text | st.lists(text, max_size=3) | json_value,
    "seed": st.integers(-5, 2**33) | json_value,
    "logprobs": st.booleans() | json_value,
    "top_logprobs": st.integers(-1, 30) | json_value,
    "logit_bias": st.dictionaries(
        st.integers(-5, 60000).map(str) | text, st.floats(-100, 100) | json_value, max_size=3
    )
    | json_value,
    "response_format": st.fixed_dictionaries(
        {"type": st.sampled_from(["text", "json_object", "json_schema"]) | json_value},
        optional={
            "json_schema": st.fixed_dictionaries({"name": text}, optional={"schema": schema})
            | json_value,
            "schema": schema,
        },
    )
    | json_value,
    "tools": st.lists(
        st.fixed_dictionaries(
            {"type": st.just("function") | json_value, "function": function | json_value}
        ),
        max_size=2,
    )
    | json_value,
    "tool_choice": st.sampled_from(["auto", "none", "required"])
    | st.fixed_dictionaries({"type": st.just("function"), "function": function})
    | json_value,
    "parallel_tool_calls": st.booleans() | json_value,
    "user": text | json_value,
    "echo": st.booleans() | json_value,
    "suffix": text | json_value,
    "best_of": st.integers(-1, 2) | json_value,
}
BASE = {
    "chat": {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2},
    "completions": {"model": MODEL, "prompt": "Hello", "max_tokens": 2},
}


@st.composite
def bodies(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """A valid request with up to three fields replaced or removed."""
    endpoint = draw(st.sampled_from(sorted(BASE)))
    body = dict(BASE[endpoint])
    for _ in range(draw(st.integers(0, 3))):
        name = draw(st.sampled_from(sorted(FIELDS)))
        if draw(st.integers(0, 5)) == 0:
            body.pop(name, None)
        else:
            body[name] = draw(FIELDS[name])
    return endpoint, body


def _unbounded(v: Any) -> bool:
    return v is None or (isinstance(v, int) and not isinstance(v, bool) and v > 3)


@FUZZ
@given(case=bodies())
def test_fuzzed_bodies_never_get_a_5xx(served: Served, case: tuple[str, dict[str, Any]]) -> None:
    endpoint, body = case
    # A body the engine would decode for long is given a small limit (minutes otherwise).
    if _unbounded(body.get("max_tokens")) and _unbounded(body.get("max_completion_tokens")):
        body = {**body, "max_tokens": 1}
    path = "/v1/chat/completions" if endpoint == "chat" else "/v1/completions"
    data = json.dumps(body).encode()
    check(send(served, request_bytes("POST", path, data)))


# -- framing ------------------------------------------------------------------------------------
_VALID = json.dumps(
    {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
).encode()
token = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=12)
header_line = st.one_of(
    st.tuples(token, st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=30)),
    st.tuples(
        st.just("Content-Length"),
        st.sampled_from(["-5", "abc", "99999999999999999999", "10", "0", " 3", "1e3"]),
    ),
    st.tuples(st.just("Transfer-Encoding"), st.sampled_from(["chunked", "gzip", "chunked, x"])),
    st.tuples(st.just("Expect"), st.sampled_from(["100-continue", "200-ok"])),
    st.tuples(st.just("Content-Encoding"), st.sampled_from(["gzip", "identity", "br"])),
    st.tuples(st.just("Connection"), st.sampled_from(["close", "keep-alive", "upgrade"])),
    st.tuples(st.just("Upgrade"), st.just("websocket")),
)


def _mostly(common: list[str], rare: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(common), st.sampled_from(common), st.sampled_from(common), rare
    )


request_line = st.tuples(
    _mostly(
        ["GET", "POST", "POST", "HEAD"], st.sampled_from(["PUT", "OPTIONS", "CONNECT"]) | token
    ),
    _mostly(
        [
            "/v1/chat/completions",
            "/v1/completions",
            "/v1/models",
            "/health",
            "/metrics",
            "/tokenize",
            "/detokenize",
            "/slots",
            "/props",
        ],
        st.sampled_from(["*", "/x?y=1", "//", "http://h/v1/models", "/health?x=%zz"]) | token,
    ),
    _mostly(["HTTP/1.1", "HTTP/1.1", "HTTP/1.0"], st.sampled_from(["HTTP/2.0", "HTTP/1.x", ""])),
)
body_bytes = st.sampled_from(
    [b"", _VALID, _VALID, b'{"content": "hi"}', b'{"tokens": [1, 2]}', b"{", b"\xff\xfe"]
) | st.binary(max_size=64)
chunked_body = st.lists(
    st.tuples(st.sampled_from(["%x", "zz", "-1", "%x;ext=1", "%X  "]), st.binary(max_size=16)),
    max_size=3,
).map(
    lambda cs: (
        b"".join(
            (fmt % len(d) if "%" in fmt else fmt).encode() + b"\r\n" + d + b"\r\n" for fmt, d in cs
        )
        + b"0\r\n\r\n"
    )
)


@FUZZ
@given(
    line=request_line,
    host=st.booleans() | st.just(True),
    headers=st.lists(header_line, max_size=2),
    body=body_bytes | chunked_body,
    crlf=st.sampled_from(["\r\n"] * 5 + ["\n"]),
)
# Found by this test: a target that is no path met aiohttp's own text 417.
@example(
    line=("CONNECT", "/v1/chat/completions", "HTTP/1.1"),
    host=True,
    headers=[("Expect", "200-ok")],
    body=b"",
    crlf="\r\n",
)
def test_fuzzed_framing_never_gets_a_5xx(
    served: Served,
    line: tuple[str, str, str],
    host: bool,
    headers: list[tuple[str, str]],
    body: bytes,
    crlf: str,
) -> None:
    method, target, version = line
    lines = [f"{method} {target} {version}".rstrip()]
    if host:
        lines.append("Host: 127.0.0.1")
    lines += [f"{k}: {v}" for k, v in headers]
    if not any(k.lower() in ("content-length", "transfer-encoding") for k, _ in headers) and body:
        lines.append(f"Content-Length: {len(body)}")
    data = (crlf.join(lines) + crlf + crlf).encode("latin-1") + body
    check(send(served, data, head=method == "HEAD"), head_only=method == "HEAD")


_MAX_TOKENS = re.compile(rb'"max_tokens":(-?\d+)')


def _short(raw: bytes) -> bool:
    """Whether the engine would finish this request soon: no request for the served
    model with a prompt, or one that asks for at most 3 tokens."""
    if MODEL.encode() not in raw or not (b'"messages"' in raw or b'"prompt"' in raw):
        return True
    m = _MAX_TOKENS.search(raw)
    return m is not None and int(m.group(1)) <= 3


@settings(
    FUZZ, max_examples=40, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)
@given(raw=raw_requests(MODEL))
def test_the_gateways_framing_fuzz_never_gets_a_5xx(served: Served, raw: bytes) -> None:
    """The framing cases the gateway's fuzz test sends (testing.http_fuzz), here too."""
    assume(_short(raw))  # a long generation proves nothing more and takes minutes
    check(send(served, raw))


def test_the_engine_is_healthy_after_the_fuzzing(served: Served) -> None:
    assert served.proc.poll() is None
    kids = psutil.Process(served.proc.pid).children(recursive=True)
    assert kids and all(k.is_running() for k in kids)
    assert urllib.request.urlopen(served.url + "/health", timeout=10).status == 200
    req = urllib.request.Request(
        served.url + "/v1/chat/completions", _VALID, {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        assert json.loads(r.read())["usage"]["completion_tokens"] >= 1
