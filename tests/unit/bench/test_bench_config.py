"""Flag parsers: SLOs, level lists, length distributions, datasets, config checks."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.bench.config import BenchConfig, parse_levels, parse_slo
from infersight.bench.datasets import load_dataset
from infersight.bench.workload import Distribution
from infersight.core.errors import ConfigError


def test_parse_slo_units_and_stats() -> None:
    assert parse_slo("ttft_p99<500ms,tpot_p99<50ms") == {"ttft_p99": 0.5, "tpot_p99": 0.05}
    assert parse_slo("e2e<2s") == {"e2e_max": 2.0}
    assert parse_slo("itl_p99.9 <= 80ms") == {"itl_p99.9": 0.08}
    assert parse_slo("e2e_p50<1.5m") == {"e2e_p50": 90.0}
    assert parse_slo("ttft_from_sent_p50<300us") == pytest.approx({"ttft_from_sent_p50": 3e-4})


# a bare number is refused: seconds in every other flag, milliseconds in vLLM's --goodput
@pytest.mark.parametrize(
    "bad", ["", "ttft>5ms", "foo_p99<5ms", "ttft_p42x<1", "ttft_p99<0ms", "ttft_p99<500", "e2e<2x"]
)
def test_parse_slo_rejects(bad: str) -> None:
    with pytest.raises(ConfigError):
        parse_slo(bad)


@given(
    st.dictionaries(
        st.sampled_from(["ttft_p99", "tpot_p50", "e2e_p95", "itl_mean", "ttft_p99.9"]),
        st.integers(1, 100_000),
        min_size=1,
    )
)
@settings(max_examples=50, deadline=None)
def test_parse_slo_roundtrip(goals: dict[str, int]) -> None:
    text = ",".join(f"{k}<{v}ms" for k, v in goals.items())
    parsed = parse_slo(text)
    assert parsed == pytest.approx({k: v / 1000 for k, v in goals.items()})


def test_parse_levels() -> None:
    assert parse_levels("1, 4,16", int, "--concurrency") == [1, 4, 16]
    assert parse_levels("0.5,2", float, "--rate") == [0.5, 2.0]
    with pytest.raises(ConfigError):
        parse_levels("1,x", int, "--concurrency")


@pytest.mark.parametrize(
    ("text", "mean"),
    [
        ("fixed:64", 64),
        ("64", 64),
        ("uniform:10:30", 20),
        ("normal:100:10", 100),
        ("lognormal:200:50", 200),
    ],
)
def test_distributions_have_their_mean(text: str, mean: float) -> None:
    d = Distribution.parse(text, "--input-tokens")
    draws = d.sample(5000, np.random.default_rng(0))
    assert min(draws) >= 1
    assert abs(np.mean(draws) - mean) < 0.03 * mean + 0.5


@pytest.mark.parametrize(
    "bad", ["fixed", "uniform:5", "normal:a:b", "zipf:1:2", "uniform:9:3", "0"]
)
def test_distribution_syntax_errors(bad: str) -> None:
    with pytest.raises(ConfigError):
        Distribution.parse(bad, "--input-tokens")


def test_config_checks_are_one_line() -> None:
    with pytest.raises(ConfigError, match="find-max"):
        BenchConfig.build(find_max=True)
    with pytest.raises(ConfigError, match="one of"):
        BenchConfig.build(concurrency=[1], rate=[2.0])
    with pytest.raises(ConfigError, match="price"):
        BenchConfig.build(price_in=1.0)
    with pytest.raises(ConfigError, match="warmup"):
        BenchConfig.build(warmup="ten")
    cfg = BenchConfig.build(slo="ttft_p99<1s", rate=[1.0, 2.0], burstiness=0.5)
    assert cfg.slo == {"ttft_p99": 1.0}
    assert [lv.arrival for lv in cfg.levels()] == ["gamma", "gamma"]


def test_datasets(tmp_path: Path) -> None:
    jl = tmp_path / "d.jsonl"
    jl.write_text(
        json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 7})
        + "\n\n"
        + json.dumps([{"role": "user", "content": "yo"}])
        + "\n"
    )
    items = load_dataset(str(jl))
    assert items[0] == ([{"role": "user", "content": "hi"}], 7)
    assert items[1][1] is None
    sg = tmp_path / "s.json"
    sg.write_text(
        json.dumps(
            [
                {
                    "conversations": [
                        {"from": "human", "value": "q?"},
                        {"from": "gpt", "value": "a" * 40},
                    ]
                },
                {"conversations": [{"from": "gpt", "value": "orphan"}]},
            ]
        )
    )
    assert load_dataset(str(sg)) == [([{"role": "user", "content": "q?"}], 10)]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"messages": 3}\n')
    with pytest.raises(ConfigError, match=":1:"):
        load_dataset(str(bad))
    with pytest.raises(ConfigError, match="cannot read"):
        load_dataset(str(tmp_path / "missing.json"))


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"endpoint": "foo"}, "--endpoint: Input should be 'chat' or 'completions'"),
        ({"sweep": "manual"}, "--sweep: Input should be 'auto'"),
        ({"input_tokens": "zipf:1:2"}, "--input-tokens 'zipf:1:2'"),
        ({"output_tokens": "uniform:9:3"}, "--output-tokens 'uniform:9:3'"),
        ({"dataset": "/nonexistent.jsonl"}, "--dataset /nonexistent.jsonl: cannot read"),
        ({"prices": "/nonexistent.toml"}, "/nonexistent.toml"),
        # the flag as the user writes it, not the field's name (engine_parallel)
        ({"engine_parallel": 0}, "--parallel: Input should be greater than or equal to 1"),
    ],
)
def test_the_config_checks_every_flag_before_anything_starts(
    kw: dict[str, str], message: str
) -> None:
    # One line that names the flag, as the CLI prints it; no pydantic report.
    with pytest.raises(ConfigError) as err:
        BenchConfig.build(url="http://127.0.0.1:9", **kw)
    assert message in str(err.value) and "\n" not in str(err.value)
