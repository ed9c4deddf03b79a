"""The fake engine's /metrics dialects against the engine table: every name a dialect
serves is one engines.toml maps (nothing lands in raw.*), and every signal the table
maps for a current release of that engine is served."""

from __future__ import annotations

import pytest

from infersight.core.engines import engine_specs
from infersight.telemetry.engine_metrics import Normalizer, detect_engine
from infersight.telemetry.promtext import parse_metrics
from infersight_testkit.fake.config import FakeConfig
from infersight_testkit.fake.dialects import DIALECTS
from infersight_testkit.fake.metrics import EngineMetrics
from infersight_testkit.fake.slots import SlotPool


def current_signals(engine: str) -> set[str]:
    """Normalised names the table maps from names current releases export."""
    spec = engine_specs()[engine]
    return {r.name for rules in spec.metrics.values() for r in rules if r.legacy is None}


def _served(dialect: str) -> str:
    # A KV capacity: vLLM's cache_config_info has one to export.
    cfg = FakeConfig(metrics_dialect=dialect, slots=2, itl=0.01, kv_capacity=4096)
    m = EngineMetrics(cfg, SlotPool(2, kv_capacity=4096))
    m.arrived()
    m.observe(queue=0.2, ttft=0.5, itl=0.01, e2e=1.5, prompt=40, tokens=101, finish="stop")
    m.arrived()
    m.failed_with(429)
    m.abort()
    return m.render().decode()


@pytest.mark.parametrize("dialect", DIALECTS)
def test_dialect_serves_exactly_the_tables_current_names(dialect: str) -> None:
    text = _served(dialect)
    series, hists = parse_metrics(text)
    assert detect_engine({s.name for s in series} | {h.family for h in hists}) == dialect
    samples = Normalizer(dialect, source="fake").normalize_text(text, 1.0)
    raw = sorted({s.name for s in samples if s.name.startswith("raw.")})
    assert raw == [], f"{dialect} serves names engines.toml does not map: {raw}"
    got = {s.name for s in samples}
    missing = current_signals(dialect) - got
    assert missing == set(), f"{dialect} lacks signals the table maps: {sorted(missing)}"


def test_dialects_count_what_happened() -> None:
    samples = Normalizer("tgi", source="fake").normalize_text(_served("tgi"), 1.0)
    by = {(s.name, s.labels.get("stat")): s.value for s in samples}
    assert by[("engine.requests_total", None)] == 2
    assert by[("engine.request_errors_total", None)] == 1
    assert by[("engine.requests_finished_total", None)] == 1  # the abort did not succeed
    assert by[("engine.prompt_tokens_total", None)] == 40
    assert by[("engine.e2e_seconds", "count")] == 1
    samples = Normalizer("vllm", source="fake").normalize_text(_served("vllm"), 1.0)
    by = {(s.name, s.labels.get("stat")): s.value for s in samples}
    assert by[("engine.requests_aborted_total", None)] == 1
    assert by[("engine.itl_seconds", "count")] == 100  # one per inter-token gap
    assert by[("engine.tpot_seconds", "sum")] == pytest.approx(0.01)


def test_unknown_dialect_is_one_clear_error() -> None:
    from infersight.core.errors import ConfigError

    with pytest.raises(ConfigError, match="choose one of vllm, sglang, tgi, llamacpp"):
        EngineMetrics(FakeConfig(metrics_dialect="triton"), SlotPool(1))
