"""resolve_api_key: env and file sources, placeholders refused, the key never shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from infersight.client import is_placeholder, resolve_api_key
from infersight.client.errors_map import auth_hint, scrub, status_error
from infersight.core.errors import AuthError, ConfigError

PLACEHOLDERS = [
    "",
    "  ",
    "YOUR_API_KEY",
    "your-openai-key-here",
    "YOUR_OPENAI_API_KEY",
    "sk-xxxx",
    "sk-xxxxxxxxxxxxxxxx",
    "sk-...",
    "changeme",
    "CHANGE_ME",
    "<api-key>",
    "xxx",
    "xxxxxxxx",
    "${OPENAI_API_KEY}",
    "placeholder",
    "api_key",
]
REAL = ["sk-proj-4f9Qz81LmX0aB7", "hf_AbCdEf123456", "s3cret-key-123", "EMPTY", "token-abc123"]


@pytest.mark.parametrize("value", PLACEHOLDERS)
def test_placeholders_detected(value: str) -> None:
    assert is_placeholder(value)


@pytest.mark.parametrize("value", REAL)
def test_real_looking_keys_accepted(value: str) -> None:
    assert not is_placeholder(value)


def test_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "  s3cret-key-123\n")
    assert resolve_api_key(env="MY_KEY") == "s3cret-key-123"


@pytest.mark.parametrize("value", ["YOUR_API_KEY", "sk-xxxx", ""])
def test_env_placeholder_refused_naming_variable(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("MY_KEY", value)
    with pytest.raises(ConfigError) as ei:
        resolve_api_key(env="MY_KEY")
    assert "MY_KEY" in str(ei.value)
    if value:
        assert value not in str(ei.value)


def test_file_key_and_placeholder(tmp_path: Path) -> None:
    f = tmp_path / "key"
    f.write_text("s3cret-key-123\nsecond line ignored\n")
    assert resolve_api_key(file=str(f)) == "s3cret-key-123"
    f.write_text("sk-xxxxxxxx\n")
    with pytest.raises(ConfigError, match=str(f)) as ei:
        resolve_api_key(file=str(f))
    assert "sk-xxxxxxxx" not in str(ei.value)
    with pytest.raises(ConfigError, match="no such file"):
        resolve_api_key(file=str(tmp_path / "missing"))


def test_precedence_and_required(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    f = tmp_path / "key"
    f.write_text("from-file-1234\n")
    monkeypatch.setenv("MY_KEY", "from-env-1234")
    assert resolve_api_key(env="MY_KEY", file=str(f)) == "from-env-1234"
    monkeypatch.setenv("MY_KEY", "")  # set but empty: the file is used
    assert resolve_api_key(env="MY_KEY", file=str(f)) == "from-file-1234"
    monkeypatch.delenv("MY_KEY")
    assert resolve_api_key(env="MY_KEY") is None
    with pytest.raises(ConfigError, match="MY_KEY"):
        resolve_api_key(env="MY_KEY", required=True)


def test_401_message_explains_and_scrubs_key() -> None:
    key = "s3cret-key-123"
    body = b'{"error": {"message": "Incorrect API key provided: s3cret-key-123"}}'
    err = status_error(
        401,
        body,
        {},
        url="http://x/v1/chat/completions",
        request_id="r",
        key=key,
        key_source="$MY_KEY",
    )
    assert isinstance(err, AuthError) and not err.retryable
    assert key not in str(err) and key not in err.body
    assert "rejected" in str(err) and "$MY_KEY" in str(err)
    assert "no API key was sent" in auth_hint(401, False, None)
    assert "not allowed" in auth_hint(403, True, None)
    assert scrub("abc s3cret-key-123", key) == "abc ***"
