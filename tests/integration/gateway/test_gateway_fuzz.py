"""Fuzzing a real `infersight gateway` process (issue 12): Hypothesis over request
bodies and over raw HTTP framing. Whatever arrives: never a 5xx, always a JSON error
body, and the process still healthy afterwards.

The gateway runs as users run it (the CLI, its own process) in front of a fake
upstream process, with 1 s head/body timeouts so requests that promise more than they
send end quickly, and ``max_tokens_cap`` so no fuzzed body asks for a billion tokens.
Bounded for CI: about 150 examples in all, well under a minute.
"""

from __future__ import annotations

import subprocess
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from infersight_testkit.cli_process import interrupt, start_cli
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI
from support.http_fuzz import PATHS, check_answer, json_bodies, raw_requests
from support.raw_http import exchange, request_bytes

FUZZ = settings(
    max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


@dataclass
class Proc:
    proc: subprocess.Popen[str]
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


@pytest.fixture(scope="module")
def gateway() -> Iterator[Proc]:
    with FakeOpenAI.subprocess(FakeConfig(tokens=3)) as fake:
        env = {
            "INFERSIGHT_GATEWAY_CLIENT_HEADER_TIMEOUT_S": "1",
            "INFERSIGHT_GATEWAY_CLIENT_BODY_TIMEOUT_S": "1",
        }
        proc, _, url = start_cli(
            "--upstream",
            f"up={fake.base_url},models=fake,max_tokens_cap=4",
            "--port",
            "0",
            "--no-access-log",
            env=env,
            wait=60,
            stdout=subprocess.DEVNULL,
        )
        try:
            host, port = url.removeprefix("http://").rsplit(":", 1)
            yield Proc(proc, host, int(port))
        finally:
            rc = interrupt(proc, 15)
        err = proc.stderr.read() if proc.stderr else ""
    assert rc == 0 and "Traceback" not in err, err


def _healthy(g: Proc) -> None:
    assert g.proc.poll() is None, "the gateway process died"
    with urllib.request.urlopen(g.url + "/health", timeout=10) as r:
        assert r.status == 200 and orjson.loads(r.read())["status"] == "ok"


@FUZZ
@given(path=st.sampled_from(PATHS), body=json_bodies("fake"))
def test_any_body_gets_a_clean_answer(gateway: Proc, path: str, body: bytes) -> None:
    ans = exchange(
        gateway.host,
        gateway.port,
        [request_bytes("POST", path, body, {"Content-Type": "application/json"})],
        timeout=10,
    )
    check_answer(ans)


@settings(FUZZ, max_examples=80)
@given(raw=raw_requests("fake"))
def test_any_framing_gets_a_clean_answer(gateway: Proc, raw: bytes) -> None:
    check_answer(exchange(gateway.host, gateway.port, [raw], timeout=10))


def test_the_gateway_is_healthy_after_the_fuzzing(gateway: Proc) -> None:
    # Runs after the two fuzz tests (file order): the same process is still serving.
    _healthy(gateway)
    ans = exchange(
        gateway.host,
        gateway.port,
        [
            request_bytes(
                "POST",
                "/v1/chat/completions",
                orjson.dumps({"model": "fake", "messages": [{"role": "user", "content": "hi"}]}),
            )
        ],
    )
    assert ans.status == 200 and ans.json()["usage"]["completion_tokens"] == 3
