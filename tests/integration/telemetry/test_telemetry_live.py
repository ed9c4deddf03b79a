"""Live sampling: what telemetry sees of a server in a few seconds, as a RunResult."""

from __future__ import annotations

import pytest

from infersight.telemetry import sample_url_async
from infersight_testkit import FakeConfig, FakeOpenAI

pytestmark = pytest.mark.timeout(60)


async def test_a_live_server_sampled_with_probes_through_its_key() -> None:
    fake = FakeOpenAI(FakeConfig(tokens=4, metrics_dialect="vllm", api_key="live-key-1"))
    async with fake.running() as srv:
        # The OpenAI base URL (with /v1) names the same server as its root.
        result = await sample_url_async(
            srv.base_url + "/v1/",
            1.5,
            api_key="live-key-1",
            probe=True,
            interval=0.25,
            max_tokens=4,
        )
    assert result.kind == "monitor"
    assert result.config["engine"] == {"url": srv.base_url, "engine": "vllm"}
    assert result.config["probe"] is True and result.config["seconds"] == 1.5
    names = {s.name for s in result.samples}
    assert {"engine.up", "engine.requests_running", "host.cpu_percent"} <= names
    # The probes went through with the key: one small streamed request at a time.
    assert result.records and all(r.ok for r in result.records), result.records[:1]
    assert {r.labels["level"] for r in result.records} == {"probe"}
    assert all(r.completion_tokens == 4 for r in result.records)


async def test_without_probes_only_samples() -> None:
    async with FakeOpenAI(FakeConfig(metrics_dialect="llamacpp")).running() as srv:
        result = await sample_url_async(srv.base_url, 0.6, probe=False, interval=0.2)
        requests = srv.stats["requests"]
    assert result.records == [] and result.config["engine"]["engine"] == "llamacpp"
    assert any(s.name == "engine.slots" for s in result.samples)
    assert requests == 0  # no generation: only /metrics (and /props) were asked
