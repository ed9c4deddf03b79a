"""An engine started with an API key refuses requests without it."""

from __future__ import annotations

import secrets
import urllib.error
import urllib.request
from collections.abc import Iterator

import openai
import pytest

from infersight.engine import EmbeddedEngine

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def keyed() -> Iterator[EmbeddedEngine]:
    with EmbeddedEngine(parallel=1, ctx=1024, api_key="is-" + secrets.token_hex(16)) as eng:
        yield eng


def _status(url: str, key: str | None = None) -> int:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


def test_requests_without_the_key_get_401(keyed: EmbeddedEngine) -> None:
    assert keyed.api_key
    assert _status(keyed.base_url + "/v1/models") == 401
    assert _status(keyed.base_url + "/v1/models", "wrong-key-0000") == 401
    assert _status(keyed.base_url + "/v1/models", keyed.api_key) == 200
    # Liveness stays open for load balancers; metrics need the key.
    assert _status(keyed.base_url + "/health") == 200
    assert _status(keyed.base_url + "/metrics") == 401
    assert _status(keyed.base_url + "/metrics", keyed.api_key) == 200


def test_openai_client_with_and_without_key(keyed: EmbeddedEngine) -> None:
    url = keyed.base_url + "/v1"
    bad = openai.OpenAI(base_url=url, api_key="not-the-key", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as ei:
        bad.chat.completions.create(
            model=keyed.model_name, messages=[{"role": "user", "content": "hi"}], max_tokens=2
        )
    assert ei.value.status_code == 401
    good = openai.OpenAI(base_url=url, api_key=keyed.api_key, max_retries=0)
    r = good.chat.completions.create(
        model=keyed.model_name, messages=[{"role": "user", "content": "hi"}], max_tokens=2
    )
    assert r.usage is not None and r.usage.completion_tokens >= 1


def test_settings_never_hold_the_key(keyed: EmbeddedEngine) -> None:
    assert keyed.api_key is not None
    assert keyed.settings["api_key"] is True
    assert keyed.api_key not in repr(keyed.settings) and keyed.api_key not in repr(keyed)


def _cmdline_has(pid: int, text: str) -> bool:
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return text.encode() in f.read()


def test_key_is_not_on_the_engine_command_line(keyed: EmbeddedEngine) -> None:
    assert keyed.api_key is not None
    assert not _cmdline_has(keyed.pid, keyed.api_key)
