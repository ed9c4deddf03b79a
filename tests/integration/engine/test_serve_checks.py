"""`infersight serve`'s public port answers bad input the way the gateway does.

A real `infersight serve` process (the gateway, the llama.cpp engine behind it on a
private port), the official `openai` client and raw bytes on the wire.
"""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import openai
import psutil
import pytest
from test_engine_serve_cli import Served, _start

from support.raw_http import RawAnswer, exchange, exchange_on, request_bytes

pytestmark = pytest.mark.engine

MODEL = "SmolLM2-135M-Instruct"
CHAT = "/v1/chat/completions"
#: Short limits so slow-client tests take seconds (the defaults are 60/60/75 s).
LIMITS = {
    "INFERSIGHT_SERVE_HEADER_TIMEOUT_S": "1",
    "INFERSIGHT_SERVE_BODY_TIMEOUT_S": "1",
    "INFERSIGHT_SERVE_KEEPALIVE_TIMEOUT_S": "2",
    "INFERSIGHT_SERVE_MAX_CONNECTIONS_PER_CLIENT": "16",
}


def engine_url(s: Served) -> str:
    line = next(ln for ln in s.banner if ln.strip().startswith("engine"))
    return line.split()[1]


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    s = _start("--port", "0", "--parallel", "2", "--ctx", "1024", **LIMITS)
    yield s
    s.stop()


def post(s: Served, body: Any, path: str = CHAT, **headers: str) -> RawAnswer:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    ans = exchange("127.0.0.1", s.port, [request_bytes("POST", path, data, headers)], timeout=60)
    assert ans.status is not None, "serve closed without an answer"
    return ans


def assert_error(ans: RawAnswer, status: int, code: str | None = None) -> dict[str, Any]:
    assert ans.status == status, (ans.status, ans.body[:300])
    assert ans.headers.get("content-type", "").startswith("application/json")
    err = json.loads(ans.body)["error"]
    assert isinstance(err["message"], str) and err["message"] and err["type"]
    if code is not None:
        assert err["code"] == code, err
    return dict(err)


def msg(content: str = "hi") -> list[dict[str, str]]:
    return [{"role": "user", "content": content}]


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"model": MODEL, "messages": [{"content": "hi"}], "max_tokens": 2}, 400, "messages"),
        ({"messages": msg(), "max_tokens": 2}, 400, "model"),
        ({"model": 7, "messages": msg(), "max_tokens": 2}, 400, "model"),
        ({"model": "gpt-4o", "messages": msg(), "max_tokens": 2}, 404, "model"),
        ({"model": MODEL, "messages": [], "max_tokens": 2}, 400, "messages"),
        (
            {"model": MODEL, "messages": msg(), "stream": True, "stream_options": []},
            400,
            "stream_options",
        ),
        ({"model": MODEL, "messages": msg(), "max_tokens": -1}, 400, "max_tokens"),
        (
            {"model": MODEL, "messages": [{"role": "user", "content": [{"type": "text"}]}]},
            400,
            "messages",
        ),
        ({"model": MODEL, "messages": msg(), "tools": "x"}, 400, "tools"),
    ],
)
def test_bad_chat_bodies_get_a_4xx_openai_error(
    served: Served, body: dict[str, Any], status: int, param: str
) -> None:
    err = assert_error(post(served, body), status)
    assert err["param"] == param


def _tools(*tools: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": msg(), "max_tokens": 2, "tools": list(tools)}


def _history(*extra: dict[str, Any]) -> dict[str, Any]:
    return {"model": MODEL, "messages": [*msg(), *extra], "max_tokens": 2}


def _call(**fields: Any) -> dict[str, Any]:
    return {"role": "assistant", "tool_calls": [{"type": "function", **fields}]}


# Each of these made llama.cpp answer 500 ("Failed to parse tools/messages", "image input
# is not supported"); found by probing and by the fuzz test.
@pytest.mark.parametrize(
    "body",
    [
        _tools({"type": "function", "function": None}),
        _tools({"type": "function", "function": {}}),
        _tools({"type": "function", "function": {"name": 5}}),
        _tools({"type": "function", "function": {"name": "f", "description": 5}}),
        _tools({"type": "custom", "custom": {"name": "f"}}),
        _history({"role": "assistant", "tool_calls": "x"}),
        _history(_call(function={"name": "f"})),
        _history(_call(id=5, function={"name": "f", "arguments": "{}"})),
        _history(_call(function={"name": 5, "arguments": "{}"})),
        _history({"role": "assistant"}),
        {"model": MODEL, "messages": [{"role": "user", "content": "hi", "name": 5}]},
        {"model": MODEL, "messages": [{"role": "user", "content": "hi", "name": None}]},
        {"model": MODEL, "messages": [{"role": "user", "content": "x", "reasoning_content": 5}]},
        {"model": MODEL, "messages": [{"role": "tool", "content": "x", "tool_call_id": 5}]},
        {"model": MODEL, "messages": [{"role": 5, "content": "hi"}]},
        {
            "model": MODEL,
            "messages": [
                {
                    "role": "user",
                    "content": [
                        {"type": "image_url", "image_url": {"url": "http://127.0.0.1/x.png"}}
                    ],
                }
            ],
        },
    ],
)
def test_bodies_llama_cpp_answered_500_get_a_400(served: Served, body: dict[str, Any]) -> None:
    assert_error(post(served, body), 400)


def test_the_openai_client_sees_typed_errors_and_normal_answers(served: Served) -> None:
    client = openai.OpenAI(base_url=served.url + "/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.NotFoundError) as nf:
        client.chat.completions.create(model="nope", messages=msg(), max_tokens=2)  # type: ignore[arg-type]
    assert nf.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=MODEL, messages=[], max_tokens=2)
    out = client.chat.completions.create(model=MODEL, messages=msg("Say hi"), max_tokens=4)  # type: ignore[arg-type]
    assert out.usage is not None and out.usage.completion_tokens >= 1
    chunks = list(
        client.chat.completions.create(
            model=MODEL,
            messages=msg("Count"),
            max_tokens=6,
            stream=True,  # type: ignore[arg-type]
            stream_options={"include_usage": True},
        )
    )
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens >= 1
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) >= 1


def test_wrong_method_is_405_and_unknown_path_404(served: Served) -> None:
    port = served.port
    ans = exchange("127.0.0.1", port, [request_bytes("GET", CHAT)])
    assert_error(ans, 405, "method_not_allowed")
    assert ans.headers["allow"] == "POST"
    ans = exchange("127.0.0.1", port, [request_bytes("POST", "/v1/models", b"{}")])
    assert_error(ans, 405)
    assert ans.headers["allow"].split(",")[0] == "GET"
    for path in ("/v1/embeddings", "/completion", "/lora-adapters", "/slots/0?action=erase"):
        ans = exchange("127.0.0.1", port, [request_bytes("POST", path, b"{}")])
        assert_error(ans, 404, "not_found")


def _engine_pid(s: Served) -> int:
    kids = psutil.Process(s.proc.pid).children(recursive=True)
    assert len(kids) == 1, kids
    return kids[0].pid


def test_a_20_mb_body_is_413_and_never_reaches_the_engine(served: Served) -> None:
    engine = psutil.Process(_engine_pid(served))
    rss0, cpu0 = engine.memory_info().rss, sum(engine.cpu_times()[:2])
    big = b'{"model": "' + MODEL.encode() + b'", "pad": "' + b"x" * (20 * 2**20) + b'"}'
    ans = post(served, big)
    assert_error(ans, 413, "body_too_large")
    # Chunked, without a length up front: cut at the cap all the same.
    with socket.create_connection(("127.0.0.1", served.port), timeout=30) as sock:
        head = request_bytes("POST", CHAT, b"", {"Transfer-Encoding": "chunked"})
        chunk = b"%x\r\n" % (2**20) + b"x" * 2**20 + b"\r\n"
        ans2 = exchange_on(sock, [head + chunk * 12], timeout=30)
    assert_error(ans2, 413, "body_too_large")
    # The engine did no work for either body: the 20 MB once cost it 2.3 GB and 28 s.
    assert engine.memory_info().rss - rss0 < 64 * 2**20
    assert sum(engine.cpu_times()[:2]) - cpu0 < 2.0
    assert urllib.request.urlopen(served.url + "/health", timeout=10).status == 200


@pytest.mark.parametrize(
    "raw",
    [
        b"GARBAGE\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Length: -5\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"zz\r\nhello\r\n0\r\n\r\n",
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n",
        b'POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 50\r\n\r\n{"m',
        b"POST /v1/chat/co",
    ],
)
def test_malformed_framing_gets_a_json_4xx(served: Served, raw: bytes) -> None:
    # A cut head or body is answered at the 1 s head or body limit.
    ans = exchange("127.0.0.1", served.port, [raw], timeout=30)
    assert ans.status is not None and 400 <= ans.status < 500
    assert_error(ans, ans.status)


def _read_until_closed(sock: socket.socket) -> bytes:
    """What the server sent before it closed; the socket's own timeout (a TimeoutError)
    fails a test whose server never closes."""
    buf = b""
    while True:
        try:
            piece = sock.recv(65536)
        except ConnectionError:
            break
        if not piece:
            break
        buf += piece
    return buf


@pytest.mark.parametrize(
    ("sent", "status"),
    [
        (b"POST /v1/chat/completions HTTP/1.1\r\nHo", b" 408 "),  # a partial head
        (b"POST /v1/chat/completions HTTP/1.1\r\nHost: a\r\nContent-Length: 80\r\n\r\n{", b" 408 "),
        (b"", b""),  # nothing at all: closed without an answer
    ],
)
def test_slow_clients_are_cut_off_by_the_timeouts(
    served: Served, sent: bytes, status: bytes
) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=30) as sock:
        sock.sendall(sent)
        # closed by serve's 1 s limits, before this socket's 30 s timeout
        buf = _read_until_closed(sock)
    assert buf.startswith(b"HTTP/1.1" + status) if status else buf == b""
    if status:
        assert b'"code":"request_timeout"' in buf


def test_idle_keep_alive_connections_are_closed(served: Served) -> None:
    with socket.create_connection(("127.0.0.1", served.port), timeout=30) as sock:
        ans = exchange_on(sock, [request_bytes("GET", "/health")])
        assert ans.status == 200
        # kept alive: a second request goes on the same connection ...
        assert exchange_on(sock, [request_bytes("GET", "/health")]).status == 200
        # ... which serve closes once idle past its 2 s keep-alive limit, before this
        # socket's 30 s timeout
        assert sock.recv(10) == b""


def test_connections_per_client_are_capped(served: Served) -> None:
    held = [socket.create_connection(("127.0.0.1", served.port), timeout=30) for _ in range(16)]
    try:
        with socket.create_connection(("127.0.0.1", served.port), timeout=30) as extra:
            buf = _read_until_closed(extra)
        assert buf.startswith(b"HTTP/1.1 429 ")
        assert b'"type":"rate_limit_error"' in buf
    finally:
        for s in held:
            s.close()


def test_the_engine_port_is_private(served: Served) -> None:
    url = engine_url(served)
    assert url.startswith("http://127.0.0.1:") and url != served.url
    with pytest.raises(urllib.error.HTTPError) as ei:
        urllib.request.urlopen(url + "/v1/models", timeout=10)
    assert ei.value.code == 401  # the gateway holds the engine's internal key; nobody else
    req = urllib.request.Request(url + "/v1/models", headers={"Authorization": "Bearer x"})
    with pytest.raises(urllib.error.HTTPError):
        urllib.request.urlopen(req, timeout=10)
    with urllib.request.urlopen(served.url + "/v1/models", timeout=10) as r:
        assert MODEL in r.read().decode()
