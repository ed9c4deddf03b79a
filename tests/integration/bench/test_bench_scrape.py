"""`bench --url` scrapes the target's own /metrics by default (engine detected from the
metric names); `--no-scrape` turns it off; an explicit `--scrape URL` wins."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from infersight.bench import BenchConfig, run
from infersight.core.errors import ConfigError
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def fake() -> Iterator[Any]:
    """An OpenAI server without /metrics."""
    with FakeOpenAI.subprocess(FakeConfig(tokens=3)) as srv:
        yield srv


def _cfg(url: str, **kw: Any) -> BenchConfig:
    base: dict[str, Any] = {
        "url": url,
        "concurrency": [2],
        "requests": 4,
        "max_tokens": 3,
        "input_tokens": "fixed:8",
        "diagnose": False,
        "progress": False,
        "sample_interval": 0.2,
    }
    return BenchConfig(**{**base, **kw})


def _sources(result: Any) -> set[str]:
    return {s.labels["source"] for s in result.samples if s.name.startswith("engine.")}


@pytest.mark.engine
def test_the_targets_own_metrics_are_scraped_by_default(engine: Any) -> None:
    result = run(_cfg(engine.base_url, max_tokens=16))
    url = f"{engine.base_url}/metrics"
    assert result.config["engine"]["engine"] == "llamacpp"
    assert _sources(result) == {url}
    up = [s.value for s in result.samples if s.name == "engine.up"]
    assert up and all(v == 1.0 for v in up)
    assert any(s.name == "engine.requests_running" for s in result.samples)
    assert any(f"scraping the target's own metrics at {url}" in n for n in result.notes)


@pytest.mark.engine
def test_an_explicit_scrape_url_wins(engine: Any, fake: Any) -> None:
    # The load goes to the fake (no /metrics); the user names the engine's /metrics.
    url = f"{engine.base_url}/metrics"
    result = run(_cfg(fake.base_url, scrape=[url]))
    assert result.aggregates["c=2"]["requests"]["ok"] == 4
    assert _sources(result) == {url}


def test_a_target_without_metrics_is_said_so(fake: Any) -> None:
    result = run(_cfg(fake.base_url))
    assert result.aggregates["c=2"]["requests"]["ok"] == 4
    assert _sources(result) == set()
    assert result.config["engine"]["engine"] == "unknown"
    assert any(
        n.startswith(f"no engine metrics: {fake.base_url}/metrics answered HTTP 404")
        for n in result.notes
    ), result.notes


def test_no_scrape_asks_for_no_metrics(fake: Any) -> None:
    result = run(_cfg(fake.base_url, no_scrape=True))
    assert result.aggregates["c=2"]["requests"]["ok"] == 4
    assert _sources(result) == set()
    assert not any("metrics" in n for n in result.notes), result.notes


def test_no_scrape_and_scrape_together_is_one_clear_error() -> None:
    with pytest.raises(ConfigError, match="--scrape or --no-scrape, not both"):
        BenchConfig.build(url="http://127.0.0.1:1", scrape=["http://x/metrics"], no_scrape=True)
