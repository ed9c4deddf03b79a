"""BenchConfig's typed sections: each field declared once, in one section."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from infersight.bench.config import BenchConfig
from infersight.bench.level.spec import fixed_levels
from infersight.flags.bench import (
    SECTIONS,
    DistributionSection,
    LoadSection,
    OutputSection,
    ReplaySection,
    TargetSection,
    TelemetrySection,
    WorkloadSection,
)
from infersight.flags.declare import declared
from infersight.stats.aggregate import Window


def _names(section: type) -> list[str]:
    return [f.name for f in dataclasses.fields(section)]


def test_each_field_is_declared_once_with_its_help() -> None:
    """The flat names (flags, variables, the RunResult's config) are unique across the
    sections, and every field carries the help its option shows."""
    names = [n for section in SECTIONS.values() for n in _names(section)]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    for section in SECTIONS.values():
        for f, how in declared(section):
            assert how.help.strip().endswith("."), f.name
    assert set(BenchConfig().as_dict()) == set(names)


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
    with pytest.raises(AttributeError):
        cfg.load = LoadSection()
    assert cfg.replace(requests=3).load.requests == 3 and cfg.load.requests is None


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
    assert BenchConfig(warmup="2s").window() == Window.parse("2s", "auto")
