"""The CLI layer's assembly: the endpoint a command gets, the gateway config from its
flags, and the packages below refusing to run without a URL they were given."""

from __future__ import annotations

from pathlib import Path

import pytest

import infersight.entrypoints as ep_pkg
from infersight.batch import BatchConfig, run_batch
from infersight.bench import BenchConfig, run
from infersight.core.endpoint import Endpoint
from infersight.core.errors import ConfigError
from infersight.entrypoints import engine as engine_mod
from infersight.entrypoints.engine import EngineOptions, endpoint, internal_key
from infersight.entrypoints.gateway import engine_upstream, gateway_config
from infersight.gateway import GatewayConfig, serve


def test_every_name_in_all_resolves() -> None:
    for name in ep_pkg.__all__:
        assert getattr(ep_pkg, name) is not None
    with pytest.raises(AttributeError):
        _ = ep_pkg.no_such_name


def test_a_given_url_starts_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_engine(opts: EngineOptions) -> None:
        raise AssertionError("a given URL must not start the engine")

    monkeypatch.setattr(engine_mod, "new_engine", no_engine)
    with endpoint("http://127.0.0.1:9/v1/", EngineOptions(), command="bench") as ep:
        assert ep == Endpoint("http://127.0.0.1:9")
        assert not ep.started and ep.pid is None


def test_bench_batch_and_gateway_need_a_url(tmp_path: Path) -> None:
    # Only the CLI layer starts the embedded engine; the packages below say so.
    with pytest.raises(ConfigError, match=r"no server URL: .*`infersight bench`"):
        run(BenchConfig(progress=False))
    (tmp_path / "in.jsonl").write_text('"hi"\n')
    with pytest.raises(ConfigError, match=r"no server URL: .*`infersight batch`"):
        run_batch(BatchConfig(input=tmp_path / "in.jsonl", output=tmp_path / "out.jsonl"))
    with pytest.raises(ConfigError, match="no upstream"):
        serve(GatewayConfig())


def test_gateway_flags_apply_to_every_upstream(tmp_path: Path) -> None:
    conf = tmp_path / "gw.toml"
    conf.write_text('[[upstreams]]\nname = "a"\nurl = "http://127.0.0.1:1/v1"\n')
    cfg = gateway_config(
        conf,
        ["b=http://127.0.0.1:2"],
        port=0,
        concurrency=3,
        queue=5,
        adaptive=True,
        ttft_timeout=1.5,
        no_access_log=True,
    )
    assert [(u.name, u.url) for u in cfg.upstreams] == [
        ("a", "http://127.0.0.1:1"),
        ("b", "http://127.0.0.1:2"),
    ]
    for u in cfg.upstreams:
        assert (u.concurrency, u.queue, u.limiter, u.ttft_timeout_s) == (3, 5, "gradient", 1.5)
    assert cfg.port == 0 and cfg.access_log is False
    with pytest.raises(ConfigError, match="no such file"):
        gateway_config(tmp_path / "missing.toml")


def test_without_upstreams_the_flags_size_the_embedded_engine() -> None:
    cfg = gateway_config(None, concurrency=3, queue=5, adaptive=True)
    assert cfg.upstreams == []
    assert (cfg.engine_parallel, cfg.engine_queue, cfg.engine_limiter) == (3, 5, "gradient")
    up = engine_upstream(
        Endpoint("http://127.0.0.1:7", started_by="gateway", slots=3, model="m"),
        limiter=cfg.engine_limiter,
    )
    # The engine's slots are the limit (a deeper one would queue out of the gateway's
    # sight); the queue defaults to 8 per slot.
    assert (up.concurrency, up.max_concurrency, up.queue, up.limiter) == (3, 12, 24, "gradient")
    assert up.models == ["m"] and up.url == "http://127.0.0.1:7"


def test_the_engine_upstream_carries_the_engines_key_without_showing_it() -> None:
    key = internal_key()
    assert len(key) >= 40 and key != internal_key()  # random, made per start
    up = engine_upstream(
        Endpoint("http://127.0.0.1:7", api_key=key, started_by="serve", slots=2, model="m")
    )
    assert up.api_key is not None and up.api_key.get_secret_value() == key
    assert key not in repr(up) and key not in str(up.model_dump())
    assert engine_upstream(Endpoint("http://127.0.0.1:7", slots=1)).api_key is None


def test_serve_takes_the_key_from_a_variable_a_file_or_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from infersight.entrypoints.serve import resolve_key

    monkeypatch.setenv("C14C_SERVE_KEY", "sk-serve-env-1")
    monkeypatch.setenv("INFERSIGHT_API_KEY", "sk-default-1")
    f = tmp_path / "key"
    f.write_text("sk-serve-file-1\n")
    assert resolve_key(str(f), api_key_env="C14C_SERVE_KEY") == (
        "sk-serve-env-1",
        "$C14C_SERVE_KEY",
    )
    assert resolve_key(str(f)) == ("sk-serve-file-1", f"file {f}")
    assert resolve_key(None) == ("sk-default-1", "$INFERSIGHT_API_KEY")
    with pytest.raises(ConfigError, match="C14C_UNSET"):
        resolve_key(None, api_key_env="C14C_UNSET")


def test_serve_names_its_key_as_the_gateway_does() -> None:
    """serve's key goes by its variable or file name in metrics and /stats, never
    a generic "default" (and never the key itself)."""
    from infersight.entrypoints.serve import _key_label

    assert _key_label("$INFERSIGHT_API_KEY") == "INFERSIGHT_API_KEY"
    assert _key_label("$MY_KEY") == "MY_KEY"
    assert _key_label("file /etc/infersight/serve.key") == "file:serve.key"
