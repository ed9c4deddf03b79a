"""What a client sees of an upstream failure (gateway.public), and what the log gets."""

from __future__ import annotations

import logging

import orjson
import pytest

from infersight.client.errors_map import status_error
from infersight.core import errors as E
from infersight.gateway.proxy import _clamp_max_tokens
from infersight.gateway.public import FailureLog, mark, passthrough, public_message

URL = "http://svc:s3cret@10.0.0.5:8000/v1/chat/completions"


def _upstream_error(status: int, body: object) -> E.StatusError:
    raw = body if isinstance(body, bytes) else orjson.dumps(body)
    e = status_error(status, raw, {}, url=URL, request_id=None, key=None)
    mark(e, "vllm-a")
    return e


def test_an_upstream_4xx_body_passes_through_as_written() -> None:
    err = {
        "message": "too long",
        "type": "invalid_request_error",
        "code": "context_length_exceeded",
        "param": "messages",
        "extra": 1,
    }
    e = _upstream_error(400, {"error": err})
    assert passthrough(e) == (400, {"error": err})


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"detail": "field required"}, "field required"),
        (b"plain text refusal", "plain text refusal"),
    ],
)
def test_other_4xx_shapes_get_the_openai_envelope(body: object, message: str) -> None:
    status, doc = passthrough(_upstream_error(422, body)) or (0, {})
    assert status == 422 and doc["error"]["message"] == message
    assert set(doc["error"]) == {"message", "type", "code", "param"}


def test_only_upstream_client_errors_pass_through() -> None:
    assert passthrough(_upstream_error(500, {"error": {"message": "x"}})) is None
    assert passthrough(_upstream_error(401, {"error": {"message": "bad key"}})) is None
    assert passthrough(_upstream_error(429, {"error": {"message": "slow"}})) is None
    oom = _upstream_error(400, {"error": {"message": "CUDA out of memory. Tried to allocate"}})
    assert isinstance(oom, E.OutOfMemory) and passthrough(oom) is None
    own = E.BadRequest("the gateway's own", status=400)  # not marked: not an upstream's
    assert passthrough(own) is None


def test_public_message_names_the_upstream_not_its_url() -> None:
    e = _upstream_error(500, {"error": {"message": "boom, see http://10.0.0.5:8000/debug"}})
    text = public_message(e, "vllm-a")
    assert text == "upstream vllm-a failed (HTTP 500): boom, see <url>"
    assert "10.0.0.5" not in text and "s3cret" not in text and "10.0.0.5" in str(e)


def test_failure_log_is_throttled_and_has_no_credentials(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="infersight.gateway")
    now = [0.0]
    flog = FailureLog(10.0, clock=lambda: now[0])
    e = E.ConnectError(f"cannot connect to {URL}: refused")
    for _ in range(100):
        flog.failure(e, "vllm-a", "http://svc:s3cret@10.0.0.5:8000", failover=True)
    now[0] = 11.0
    flog.failure(e, "vllm-a", "http://svc:s3cret@10.0.0.5:8000", failover=True)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2 and "(+99 more in the last 10 s)" in lines[1]
    assert all("10.0.0.5:8000" in x and "s3cret" not in x for x in lines)


@pytest.mark.parametrize(
    ("body", "sent"),
    [
        ({"max_tokens": 500}, {"max_tokens": 64}),
        ({"max_tokens": 10}, {"max_tokens": 10}),
        ({}, {"max_tokens": 64}),
        ({"max_completion_tokens": 900}, {"max_completion_tokens": 64}),
        (
            {"max_tokens": 900, "max_completion_tokens": 20},
            {"max_tokens": 64, "max_completion_tokens": 20},
        ),
    ],
)
def test_max_tokens_cap(body: dict[str, int], sent: dict[str, int]) -> None:
    assert _clamp_max_tokens({"model": "m", **body}, 64) == {"model": "m", **sent}
