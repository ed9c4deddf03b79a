"""Engine settings: defaults and one-line errors for bad values (no engine needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infersight.core.errors import ConfigError
from infersight.engine import EngineConfig, default_threads, resolve_config
from infersight.engine.threads import SPIN_COUNT


def test_defaults_give_each_slot_room() -> None:
    cfg = resolve_config(parallel=8)
    assert cfg.parallel == 8
    assert cfg.ctx == 8 * 2048 and cfg.ctx_per_slot == 2048
    assert cfg.threads == default_threads() >= 1
    assert cfg.alias == "SmolLM2-135M-Instruct"
    assert cfg.host == "127.0.0.1" and cfg.api_key is None
    # More HTTP workers than slots, so queued requests reach llama.cpp's own queue.
    assert cfg.http_threads > cfg.parallel
    assert cfg.n_ubatch <= cfg.n_batch
    assert cfg.verbosity == 1


def test_explicit_total_ctx_is_split_across_slots() -> None:
    cfg = resolve_config(parallel=4, ctx=3000, threads=1)
    assert cfg.ctx == 3000 and cfg.ctx_per_slot == 750 and cfg.threads == 1


def test_config_roundtrips_through_the_child_json() -> None:
    cfg = resolve_config(parallel=2, api_key="k-123456789", verbose=True)
    back = EngineConfig.from_child(cfg.to_child())
    assert back == cfg
    assert "k-123456789" not in repr(cfg)  # the key never shows in reprs/logs


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"parallel": 0}, "--parallel"),
        ({"parallel": -3}, "--parallel"),
        ({"parallel": True}, "--parallel"),
        ({"parallel": 100000}, "--parallel"),
        ({"ctx": 0}, "--ctx"),
        ({"threads": 0}, "--threads"),
        ({"port": 70000}, "--port"),
        ({"port": -1}, "--port"),
        ({"host": ""}, "--host"),
        ({"parallel": 8, "ctx": 512}, "tokens per slot"),
        ({"api_key": " padded "}, "whitespace"),
    ],
)
def test_bad_values_are_one_line_config_errors(kwargs: dict[str, object], needle: str) -> None:
    with pytest.raises(ConfigError) as ei:
        resolve_config(**kwargs)  # type: ignore[arg-type]
    assert needle in str(ei.value)
    assert "\n" not in str(ei.value)


def test_bad_model_is_rejected_before_any_process_starts(tmp_path: Path) -> None:
    bad = tmp_path / "weights.bin"
    bad.write_bytes(b"\x00" * 64)
    with pytest.raises(ConfigError, match="not a GGUF"):
        resolve_config(model=bad)


def test_wait_policy_defaults_to_a_bounded_spin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    cfg = resolve_config()
    assert (cfg.omp_wait_policy, cfg.omp_spin_count, cfg.omp_wait_source) == (
        "AUTO",
        SPIN_COUNT,
        "default",
    )
    monkeypatch.setenv("OMP_WAIT_POLICY", "active")  # the caller's environment wins
    cfg = resolve_config()
    assert (cfg.omp_wait_policy, cfg.omp_spin_count) == ("ACTIVE", None)
    assert cfg.omp_wait_source == "$OMP_WAIT_POLICY"
    assert resolve_config(omp_wait_policy="passive").omp_wait_policy == "PASSIVE"
    with pytest.raises(ConfigError, match="OMP_WAIT_POLICY"):
        resolve_config(omp_wait_policy="sometimes")
