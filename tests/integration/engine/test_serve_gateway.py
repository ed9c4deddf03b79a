"""`infersight serve` with an API key: the gateway in front of the engine, with the
engine's own endpoints (/tokenize, /detokenize, /slots, /props, its metrics) behind
the key, and the engine's port private."""

from __future__ import annotations

import json
import os
import signal
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from test_engine_serve_cli import Served, _start

from support.raw_http import exchange_on, request_bytes

pytestmark = pytest.mark.engine

MODEL = "SmolLM2-135M-Instruct"
KEY = "is-test-" + os.urandom(8).hex()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    keyfile = Path(tmp_path_factory.mktemp("key")) / "key"
    keyfile.write_text(KEY + "\n")
    # --gateway is kept for scripts written when the gateway was optional.
    s = _start(
        "--gateway",
        "--port",
        "0",
        "--parallel",
        "2",
        "--ctx",
        "1024",
        "--api-key-file",
        str(keyfile),
    )
    yield s
    s.stop()


def call(s: Served, path: str, body: Any = None, *, key: str | None = KEY) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(s.url + path, data, {"Content-Type": "application/json"})
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_every_endpoint_but_health_needs_the_key(served: Served) -> None:
    assert call(served, "/health", key=None)[0] == 200
    for path, body in (
        ("/v1/models", None),
        ("/metrics", None),
        ("/slots", None),
        ("/props", None),
        ("/tokenize", {"content": "hi"}),
        ("/detokenize", {"tokens": [1]}),
        ("/nope", None),
        ("/v1/chat/completions", {"model": MODEL, "messages": []}),
    ):
        for key in (None, "wrong"):
            status, raw = call(served, path, body, key=key)
            assert status == 401, (path, status, raw)
            assert json.loads(raw)["error"]["code"] == "invalid_api_key"


def test_the_engines_own_endpoints_are_served_with_the_key(served: Served) -> None:
    status, raw = call(served, "/tokenize", {"content": "Hello"})
    assert status == 200
    tokens = json.loads(raw)["tokens"]
    assert tokens and all(isinstance(t, int) for t in tokens)
    status, raw = call(served, "/detokenize", {"tokens": tokens})
    assert status == 200 and json.loads(raw)["content"].strip() == "Hello"
    slots = json.loads(call(served, "/slots")[1])
    assert isinstance(slots, list) and len(slots) == 2
    assert json.loads(call(served, "/props")[1])["total_slots"] == 2
    status, raw = call(served, "/metrics")
    text = raw.decode()
    assert status == 200 and "llamacpp:requests_processing" in text
    assert "infersight_gateway_requests_total" in text


def test_bad_token_bodies_are_400_not_llama_cpps_500(served: Served) -> None:
    for body, param in (
        ({"tokens": [49152]}, "tokens"),
        ({"tokens": [10**9]}, "tokens"),
        ({"tokens": [-1]}, "tokens"),
        ({"tokens": "x"}, "tokens"),
    ):
        status, raw = call(served, "/detokenize", body)
        assert status == 400, (body, raw)
        assert json.loads(raw)["error"]["param"] == param
    status, raw = call(served, "/tokenize", {"content": 5})
    assert status == 400 and json.loads(raw)["error"]["param"] == "content"


def test_100_continue_comes_only_after_the_key(served: Served) -> None:
    body = json.dumps(
        {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    ).encode()
    for key, want in ((None, 401), (KEY, 200)):
        headers = {"Expect": "100-continue", "Content-Length": str(len(body))}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        with socket.create_connection(("127.0.0.1", served.port), timeout=30) as sock:
            sock.sendall(request_bytes("POST", "/v1/chat/completions", b"", headers))
            first = sock.recv(65536)
            if want == 401:
                # Refused before the body was asked for: no 100 Continue, ever.
                assert first.startswith(b"HTTP/1.1 401 "), first
                continue
            assert first.startswith(b"HTTP/1.1 100 Continue"), first
            ans = exchange_on(sock, [body], timeout=60)
        assert ans.status == want, ans


def test_answers_go_through_the_gateway_and_sigint_stops_it(served: Served) -> None:
    client = openai.OpenAI(base_url=served.url + "/v1", api_key=KEY, max_retries=0)
    out = client.chat.completions.with_raw_response.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Say hi"}],
        max_tokens=4,
    )
    # Only the gateway adds these headers: proof the answer went through it.
    assert out.headers.get("x-queue-delay") is not None
    assert out.headers.get("x-request-id")
    body = out.parse()
    assert body.usage is not None and body.usage.completion_tokens >= 1
    served.proc.send_signal(signal.SIGINT)
    rc = served.proc.wait(timeout=30)
    assert rc == 0
    err = served.proc.stderr.read() if served.proc.stderr else ""
    assert "Traceback" not in err and KEY not in err
