"""Config: TOML/YAML file, INFERSIGHT_GATEWAY_* env, flags; --upstream parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

from infersight.core.errors import ConfigError
from infersight.gateway.config import hash_key, load_config, parse_upstream_flag

TOML = """
default_deadline_s = 30
[[upstreams]]
name = "a"
url = "http://127.0.0.1:9000/v1/"
models = ["m"]
limiter = "aimd"
[fallbacks]
m = ["n"]
[[keys]]
name = "k"
sha256 = "%s"
requests_per_minute = 60
"""


def test_toml_file_env_and_flags_layer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "gw.toml"
    f.write_text(TOML % hash_key("secret"))
    cfg = load_config(f)
    assert cfg.default_deadline_s == 30 and cfg.upstreams[0].url == "http://127.0.0.1:9000"
    assert cfg.upstreams[0].limiter == "aimd" and cfg.fallbacks == {"m": ["n"]}
    monkeypatch.setenv("INFERSIGHT_GATEWAY_DEFAULT_DEADLINE_S", "12")
    monkeypatch.setenv("INFERSIGHT_GATEWAY_PORT", "9999")
    cfg = load_config(f, port=0)
    assert cfg.default_deadline_s == 12  # env beats file
    assert cfg.port == 0  # flag beats env


def test_yaml_file(tmp_path: Path) -> None:
    f = tmp_path / "gw.yaml"
    f.write_text(
        "upstreams:\n  - name: b\n    url: https://api.example.com\n"
        "    api_key_env: EXAMPLE_KEY\n    concurrency: 4\n"
    )
    cfg = load_config(f)
    assert cfg.upstreams[0].concurrency == 4 and cfg.upstreams[0].api_key_env == "EXAMPLE_KEY"


@pytest.mark.parametrize(
    "text,needle",
    [
        ("upstreams = [{name = 'a', url = 'ftp://x'}]", "http"),
        ("upstreams = [{name = 'a', url = 'http://x', concurrency = 0}]", "concurrency"),
        ("unknown_field = 1", "unknown_field"),
        ("[[keys]]\nname='k'\nsha256='abc'", "sha256"),
        ("upstreams = [{name='a', url='http://x'}, {name='a', url='http://y'}]", "unique"),
        ("= broken", "invalid syntax"),
    ],
)
def test_bad_files_give_one_clear_line(tmp_path: Path, text: str, needle: str) -> None:
    f = tmp_path / "gw.toml"
    f.write_text(text)
    with pytest.raises(ConfigError) as ei:
        load_config(f)
    msg = str(ei.value)
    assert needle in msg and "\n" not in msg


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config("/nonexistent/gw.toml")


def test_upstream_flag() -> None:
    d = parse_upstream_flag(
        "fast=http://h:1/v1,models=a|b,concurrency=8,queue=4,limiter=gradient,key_env=K,ttft=2.5"
    )
    assert d == {
        "name": "fast",
        "url": "http://h:1/v1",
        "models": ["a", "b"],
        "concurrency": "8",
        "queue": "4",
        "limiter": "gradient",
        "api_key_env": "K",
        "ttft_timeout_s": 2.5,
    }
    # a duration with its unit, and a key from a file
    d2 = parse_upstream_flag("b=http://h:2,ttft=500ms,key_file=/run/secrets/b")
    assert d2["ttft_timeout_s"] == 0.5 and d2["api_key_file"] == "/run/secrets/b"
    cfg = load_config(None, upstreams=[d])
    assert cfg.upstreams[0].concurrency == 8 and cfg.upstreams[0].url == "http://h:1"
    for bad in ("nourl", "a=http://x,color=red", "=http://x", "a=http://x,ttft=soon"):
        with pytest.raises(ConfigError):
            parse_upstream_flag(bad)


def test_shipped_example_config_is_valid() -> None:
    from importlib import resources

    text = resources.files("infersight.data").joinpath("gateway/example.toml").read_text()
    import tomllib

    cfg = load_config(None, **tomllib.loads(text))
    assert [u.name for u in cfg.upstreams] == ["vllm-a", "vllm-b", "openai"]
    assert cfg.upstreams[0].limiter == "gradient" and cfg.fallbacks
