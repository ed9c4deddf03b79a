"""The monitor's derived state (rates, latency) and its rendering with GPU data."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from infersight.core.records import Sample
from infersight.monitor import MonitorState, ViewInfo, render
from infersight.telemetry import GpuSampler, ReplayBackend

E = {"engine": "vllm", "source": "s"}


def _round(t: float, prompt: float, running: float, ttft: dict[str, float | None]) -> list[Sample]:
    out = [
        Sample(t, "engine.prompt_tokens_total", prompt, dict(E)),
        Sample(t, "engine.requests_running", running, dict(E)),
        Sample(t, "engine.up", 1.0, dict(E)),
    ]
    out += [Sample(t, "engine.ttft_seconds", v, {**E, "stat": k}) for k, v in ttft.items()]
    return out


def test_rates_latest_and_latency() -> None:
    st_ = MonitorState(rate_window=5.0)
    st_.update(_round(0.0, 100.0, 3, {"sum": 1.0, "count": 10}))
    assert st_.rate("engine.prompt_tokens_total") is None  # one round: no rate yet
    st_.update(_round(1.0, 300.0, 5, {"sum": 3.0, "count": 20, "p50": 0.2, "p90": 0.3, "p99": 0.4}))
    assert st_.rate("engine.prompt_tokens_total") == pytest.approx(200.0)
    assert st_.value("engine.requests_running") == 5
    assert st_.engine == "vllm"
    lv = st_.latencies["ttft"]
    assert (lv.p50, lv.p90, lv.p99) == (0.2, 0.3, 0.4)
    assert lv.mean == pytest.approx(0.2)  # (3-1)/(20-10)
    # an interval without requests keeps the last percentiles (with their time)
    st_.update(
        _round(2.0, 300.0, 0, {"sum": 3.0, "count": 20, "p50": None, "p90": None, "p99": None})
    )
    assert st_.latencies["ttft"].p50 == 0.2 and st_.latencies["ttft"].t == 1.0
    # a counter reset reads as no rate, not a negative one
    st_.update(_round(3.0, 5.0, 0, {}))
    assert st_.rate("engine.prompt_tokens_total") is None


@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=2, max_size=30))
def test_rate_is_never_negative(increments: list[float]) -> None:
    s = MonitorState(rate_window=3.0)
    total = 0.0
    for i, inc in enumerate(increments):
        total += inc
        s.update([Sample(float(i), "engine.generation_tokens_total", total, dict(E))])
    r = s.rate("engine.generation_tokens_total")
    assert r is not None and r >= 0
    # equals the mean increment over the window actually kept
    window = increments[-min(len(increments) - 1, 3) :]  # samples within 3 s: 3 gaps
    assert r == pytest.approx(sum(window) / len(window), rel=1e-6, abs=1e-6)


async def test_render_with_replayed_gpus_and_down_engine() -> None:
    data = Path(str(resources.files("infersight.data").joinpath("telemetry")))
    g = GpuSampler(ReplayBackend(data / "nvml_replay_h100_a100.json"))
    s = MonitorState()
    s.update(await g.sample())
    s.update(
        await g.sample() + [Sample(1.0, "engine.up", 0.0, {"engine": "unknown", "source": "u"})]
    )
    c = Console(record=True, width=200)
    c.print(render(s, ViewInfo(url="http://x/metrics", interval=1.0, scrape_error="HTTP 500")))
    text = c.export_text()
    assert "NVIDIA" not in text  # names are not shown per round, indices are
    assert "100%" in text and "38%" in text  # util vs SM activity on the H100
    assert "sw_power_cap" in text and "gpu_idle" in text
    assert "DOWN" in text and "HTTP 500" in text
    assert "n/a" in text  # A100 PCIe not available
