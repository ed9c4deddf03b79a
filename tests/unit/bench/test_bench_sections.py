"""BenchConfig's typed sections: every field in exactly one, each built from it."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from infersight.bench.config import BenchConfig
from infersight.bench.sections import (
    SECTIONS,
    DistributionSection,
    LoadSection,
    OutputSection,
    ReplaySection,
    TargetSection,
    TelemetrySection,
    WorkloadSection,
    fixed_levels,
)

#: What each section claims: a field moved or added must be placed here on purpose.
CLAIMED = {
    "target": {
        "url",
        "model",
        "api_key_env",
        "api_key_file",
        "endpoint",
        "stream",
        "timeout",
        "engine_parallel",
        "engine_ctx",
        "engine_slots",
    },
    "load": {
        "concurrency",
        "rate",
        "arrival",
        "burstiness",
        "sweep",
        "sweep_levels",
        "requests",
        "duration",
        "warmup",
        "cooldown",
        "repeat",
        "max_concurrency",
        "grace",
        "slo",
        "find_max",
        "find_max_steps",
    },
    "workload": {
        "input_tokens",
        "output_tokens",
        "max_tokens",
        "dataset",
        "shared_prefix",
        "ignore_eos",
        "seed",
    },
    "replay": {
        "trace",
        "trace_format",
        "speedup",
        "trace_window",
        "on_bad_line",
        "block_size",
        "sessions",
        "turns",
        "think_time",
    },
    "distribution": {"workers", "ray", "ray_strategy", "ray_cpus", "ray_clock_interval"},
    "output": {
        "out",
        "result_filename",
        "percentile_metrics",
        "metric_percentiles",
        "price_in",
        "price_out",
        "prices",
        "diagnose",
        "progress",
    },
    "telemetry": {"scrape", "no_scrape", "sample_interval"},
}


def _names(section: type) -> set[str]:
    return {f.name for f in dataclasses.fields(section)}


@pytest.mark.parametrize("name", sorted(CLAIMED))
def test_each_section_holds_exactly_the_fields_it_claims(name: str) -> None:
    assert _names(SECTIONS[name]) == CLAIMED[name]


def test_every_config_field_is_in_exactly_one_section() -> None:
    """A new BenchConfig field in no section (or in two) fails here."""
    owners: dict[str, list[str]] = {}
    for name, section in SECTIONS.items():
        for field in _names(section):
            owners.setdefault(field, []).append(name)
    fields = set(BenchConfig.model_fields)
    assert set(owners) == fields, (
        f"fields in no section: {sorted(fields - set(owners))}; "
        f"in a section but not in BenchConfig: {sorted(set(owners) - fields)}"
    )
    assert {f: o for f, o in owners.items() if len(o) > 1} == {}


def test_section_defaults_are_the_configs() -> None:
    """A section built alone (a library caller, a test) means what the config means."""
    cfg = BenchConfig()
    for name, section in SECTIONS.items():
        assert getattr(cfg, name) == section(), name


def test_the_properties_hand_out_the_configs_values() -> None:
    cfg = BenchConfig(
        url="http://h:1",
        model="m",
        rate=[2.0, 4.0],
        burstiness=0.5,
        slo="ttft_p99<500ms",
        input_tokens="fixed:32",
        seed=7,
        workers=2,
        out="runs/x",
        scrape=["http://h:2/metrics"],
        sample_interval=0.5,
    )
    assert cfg.target == TargetSection(url="http://h:1", model="m")
    assert cfg.load.rate == (2.0, 4.0) and cfg.load.slo == {"ttft_p99": 0.5}
    assert cfg.load.open_arrival == "gamma"
    assert cfg.workload == WorkloadSection(input_tokens="fixed:32", seed=7)
    assert cfg.replay == ReplaySection() and not cfg.replay.active
    assert cfg.distribution == DistributionSection(workers=2)
    assert cfg.output == OutputSection(out="runs/x")
    assert cfg.telemetry == TelemetrySection(scrape=("http://h:2/metrics",), sample_interval=0.5)


def test_sections_are_frozen_copies() -> None:
    cfg = BenchConfig(concurrency=[1, 4], slo="ttft_p99<1s")
    load = cfg.load
    with pytest.raises(dataclasses.FrozenInstanceError):
        load.requests = 3  # type: ignore[misc]
    assert isinstance(load.concurrency, tuple)
    cfg.slo["e2e_max"] = 2.0  # the config changing later does not change the section
    assert dict(load.slo) == {"ttft_p99": 1.0}


def test_sections_pickle() -> None:
    """They cross process and Ray boundaries."""
    cfg = BenchConfig(concurrency=[2], slo="ttft_p99<1s", scrape=["http://h/metrics"])
    for name in SECTIONS:
        section = getattr(cfg, name)
        assert pickle.loads(pickle.dumps(section)) == section


def test_fixed_levels_match_the_configs() -> None:
    cfg = BenchConfig(concurrency=[1, 4], repeat=2)
    assert fixed_levels(cfg.load, cfg.replay) == cfg.levels()
    assert [lv.name for lv in cfg.levels()] == ["c=1#1", "c=4#1", "c=1#2", "c=4#2"]
    assert fixed_levels(LoadSection(), ReplaySection()) == BenchConfig().levels()
    assert [lv.name for lv in fixed_levels(LoadSection(), ReplaySection(trace="t.csv"))] == [
        "trace x1"
    ]


def test_load_helpers() -> None:
    assert LoadSection().effective_requests() == 64
    assert LoadSection(duration=10.0).effective_requests() is None
    assert LoadSection(requests=5).effective_requests() == 5
    assert BenchConfig(warmup="2s").window() == LoadSection(warmup="2s").window()
