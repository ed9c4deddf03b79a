"""Reading a fleet from Prometheus, the parts without a server: durations and times as
Prometheus users write them, selectors, the PromQL each signal becomes, counters
rebuilt from rate(), and credentials in Prometheus' http_config format."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from infersight.core.engines import engine_specs
from infersight.core.errors import ConfigError
from infersight.core.fleet import SeriesArrays
from infersight.diagnose.signals import SampleIndex
from infersight.telemetry.prometheus.auth import load_auth
from infersight.telemetry.prometheus.catalog import (
    dcgm_signals,
    dcgm_spec,
    engine_signals,
    exporter_signals,
    parse_selector,
)
from infersight.telemetry.prometheus.fleet import window_counter
from infersight.telemetry.prometheus.times import (
    parse_duration,
    parse_time,
    promql_duration,
    resolve_range,
)

UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}


# -- durations and times ---------------------------------------------------------------
@given(st.dictionaries(st.sampled_from(list(UNITS)), st.integers(1, 500), min_size=1))
def test_duration_parts_add_up_and_format_round_trips(parts: dict[str, int]) -> None:
    text = "".join(f"{parts[u]}{u}" for u in UNITS if u in parts)  # Prometheus order
    seconds = sum(UNITS[u] * n for u, n in parts.items())
    assert parse_duration(text) == seconds
    assert parse_duration(promql_duration(seconds)) == seconds


@pytest.mark.parametrize(
    "text, seconds",
    [("15s", 15), ("1h30m", 5400), ("500ms", 0.5), ("2w", 1209600), ("90", 90), ("0.5", 0.5)],
)
def test_duration_examples(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@given(st.text(max_size=12))
def test_a_bad_duration_is_one_config_error(text: str) -> None:
    try:
        v = parse_duration(text, "--step")
    except ConfigError as e:
        assert str(e).startswith("--step ")
    else:
        assert v > 0 and math.isfinite(v)


def test_times_as_prometheus_users_write_them() -> None:
    now = 1_714_575_600.0
    assert parse_time("2024-05-01T14:00:00Z", "--start") == 1_714_572_000.0
    assert parse_time("2024-05-01T16:00:00+02:00", "--start") == 1_714_572_000.0
    assert parse_time("2024-05-01 14:00", "--start") == 1_714_572_000.0  # no offset: UTC
    assert parse_time("1714572000", "--start") == 1_714_572_000.0
    assert parse_time("now-1h", "--start", now) == now - 3600
    with pytest.raises(ConfigError, match="--end 'yesterday'"):
        parse_time("yesterday", "--end")


def test_range_is_aligned_and_checked() -> None:
    now = 1_714_575_607.0
    assert resolve_range(since="1h", start=None, end=None, step=15, now=now) == (
        1_714_572_000.0,
        1_714_575_600.0,
    )
    assert resolve_range(since=None, start="now-10m", end="now-5m", step=60, now=now) == (
        1_714_575_000.0,
        1_714_575_300.0,
    )  # down to whole minutes
    with pytest.raises(ConfigError, match="not both"):
        resolve_range(since="1h", start="now-1h", end=None, step=15, now=now)
    with pytest.raises(ConfigError, match="shorter than one --step"):
        resolve_range(since=None, start="now-5s", end="now", step=15, now=now)
    with pytest.raises(ConfigError, match="future"):
        resolve_range(since=None, start="now-1h", end=str(now + 7200), step=15, now=now)


def test_selector_forms() -> None:
    assert parse_selector('{namespace="llm"}') == 'namespace="llm"'
    assert parse_selector('namespace="llm", job=~"vllm.*",') == 'namespace="llm", job=~"vllm.*"'
    assert parse_selector("") == ""
    for bad in ("{namespace}", '{namespace="llm"', "llm"):
        with pytest.raises(ConfigError, match="--selector"):
            parse_selector(bad)


# -- the PromQL of each signal ---------------------------------------------------------
VLLM_NAMES = {
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:num_preemptions_total",
    "vllm:request_success_total",
    "vllm:time_to_first_token_seconds_bucket",
    "vllm:inter_token_latency_seconds_bucket",
    "vllm:e2e_request_latency_seconds_bucket",
    "vllm:generation_tokens_total",
}


def test_vllm_signals_aggregate_per_replica_and_compute_in_promql() -> None:
    sig = {
        (s.name, s.stat): s
        for s in engine_signals(engine_specs()["vllm"], VLLM_NAMES, 'namespace="llm"')
    }
    run = sig[("engine.requests_running", "")].promql
    assert run.startswith("sum by (namespace, pod, job, instance, model_name")
    assert run.endswith('(vllm:num_requests_running{namespace="llm"})')
    assert sig[("engine.kv_cache_usage", "")].promql.startswith("max by (")  # engines.toml agg
    pre = sig[("engine.preemptions_total", "")]
    assert pre.counter and 'rate(vllm:num_preemptions_total{namespace="llm"}[{win}])' in pre.promql
    ttft = sig[("engine.ttft_seconds", "p99")].promql
    assert ttft.startswith("histogram_quantile(0.99, sum by (le, namespace, pod")
    # once per window, over the window: the quantile of the window's requests
    assert 'rate(vllm:time_to_first_token_seconds_bucket{namespace="llm"}[{win}])' in ttft
    assert sig[("engine.ttft_seconds", "p99")].per_window and pre.per_window
    assert not sig[("engine.requests_running", "")].per_window  # R's plateau needs each step
    # throughput and medians only when the roofline floors can use them
    assert ("engine.generation_tokens_total", "") not in sig and (
        "engine.itl_seconds",
        "p50",
    ) not in sig
    phys = {(s.name, s.stat) for s in engine_signals(engine_specs()["vllm"], VLLM_NAMES, "", True)}
    assert {
        ("engine.generation_tokens_total", ""),
        ("engine.itl_seconds", "p50"),
        ("engine.ttft_seconds", "p50"),
        ("engine.e2e_seconds", "p50"),
    } <= phys


def test_gateway_label_matchers_and_tgi_histogram_parts() -> None:
    gw = engine_signals(
        engine_specs()["infersight"],
        {"infersight_gateway_in_flight", "infersight_gateway_requests_total"},
        "",
    )
    total = next(s for s in gw if s.name == "engine.requests_total")
    assert "rate(infersight_gateway_requests_total[{win}])" in total.promql
    tgi = engine_signals(
        engine_specs()["tgi"],
        {"tgi_batch_current_size", "tgi_request_generated_tokens_sum"},
        "",
        True,
    )
    gen = next(s for s in tgi if s.name == "engine.generation_tokens_total")
    assert gen.counter and "rate(tgi_request_generated_tokens_sum[{win}])" in gen.promql


def test_dcgm_and_exporter_signals() -> None:
    names = {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_DEV_FB_USED"}
    sig = {s.name: s for s in dcgm_signals(dcgm_spec(), names, "")}
    assert set(sig) == {"gpu.utilization", "gpu.sm_activity"}  # what the rules read
    assert sig["gpu.utilization"].promql.endswith(
        "(avg_over_time(DCGM_FI_DEV_GPU_UTIL[{win}]))) * 0.01"
    )
    exp = {
        "infersight_engine_requests_running",
        "infersight_engine_ttft_seconds_bucket",
        "infersight_gpu_utilization",
        "infersight_process_cpu_percent",
    }
    es = {(s.name, s.stat): s for s in exporter_signals(exp, "")}
    assert "histogram_quantile(0.99" in es[("engine.ttft_seconds", "p99")].promql
    assert es[("process.cpu_percent", "")].labels == (("name", "engine"),)
    old = exporter_signals({"infersight_engine_ttft_seconds"}, "")  # a summary (before 0.1)
    assert 'quantile="0.99"' in old[0].promql


# -- counters from rate() -----------------------------------------------------------
@given(
    st.lists(st.floats(0, 1000), min_size=1, max_size=40),
    st.sampled_from([1.0, 15.0]),
    st.integers(2, 60),
)
def test_counter_rebuilt_from_window_rates_gives_back_each_rate(
    rates: list[float], step: float, steps: int
) -> None:
    window = steps * step
    t = 1000.0 + window * np.arange(1, len(rates) + 1) - step  # each window's last step
    tt, cum = window_counter(t, np.asarray(rates), window - step)
    assert np.all(np.diff(cum) >= 0) and np.all(np.diff(tt) >= 0)
    idx = SampleIndex.from_series([SeriesArrays("engine.preemptions_total", {}, tt, cum)])
    for k, r in enumerate(rates):
        a = 1000.0 + window * k  # the window [a, a + window - step/2] as the rules read it
        got = idx.counter_rate("engine.preemptions_total", a, a + window - step / 2)
        assert got == pytest.approx(r, rel=1e-9, abs=1e-9)


def test_missing_rates_count_as_zero() -> None:
    tt, cum = window_counter(np.array([9.0, 19.0]), np.array([np.nan, 2.0]), 9.0)
    assert tt.tolist() == [0.0, 9.0, 10.0, 19.0] and cum.tolist() == [0.0, 0.0, 0.0, 18.0]


# -- credentials -------------------------------------------------------------------------
def test_http_config_file_as_prometheus_writes_it(tmp_path: Path) -> None:
    (tmp_path / "secrets").mkdir()
    (tmp_path / "secrets" / "pw").write_text("s3cret-pw\n")
    cfg = tmp_path / "http.yml"
    cfg.write_text(
        "basic_auth:\n  username: sre\n  password_file: secrets/pw\n"
        "tls_config:\n  ca_file: ca.pem\n  insecure_skip_verify: true\n"
    )
    auth = load_auth(cfg)
    assert auth.headers() == {"Authorization": "Basic c3JlOnMzY3JldC1wdw=="}  # sre:s3cret-pw
    assert auth.ca_file == tmp_path / "ca.pem" and auth.insecure_skip_verify
    assert "s3cret" not in repr(auth)
    (tmp_path / "token").write_text("tok-123\n")
    cfg.write_text("authorization:\n  type: Bearer\n  credentials_file: token\n")
    assert load_auth(cfg).headers() == {"Authorization": "Bearer tok-123"}


@pytest.mark.parametrize(
    "text, message",
    [
        ("oauth2:\n  client_id: x\n", "oauth2 not supported"),
        ("authorization:\n  type: Digest\n  credentials: x\n", "Bearer only"),
        (
            "basic_auth:\n  username: sre\n  password_file: missing\n",
            r"cannot read \(no such file\)",
        ),
        ("- a\n", "expected a mapping"),
    ],
)
def test_bad_http_config_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    cfg = tmp_path / "http.yml"
    cfg.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_auth(cfg)


def test_credentials_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "t").write_text("env-token\n")
    monkeypatch.setenv("INFERSIGHT_PROMETHEUS_BEARER_TOKEN_FILE", str(tmp_path / "t"))
    assert load_auth().headers() == {"Authorization": "Bearer env-token"}
    monkeypatch.delenv("INFERSIGHT_PROMETHEUS_BEARER_TOKEN_FILE")
    monkeypatch.setenv("INFERSIGHT_PROMETHEUS_USERNAME", "sre")
    monkeypatch.setenv("INFERSIGHT_PROMETHEUS_PASSWORD", "pw")
    assert load_auth().headers()["Authorization"].startswith("Basic ")
    monkeypatch.setenv("INFERSIGHT_PROMETHEUS_CA_FILE", str(tmp_path / "nope.pem"))
    with pytest.raises(ConfigError, match="ca_file"):
        load_auth().ssl_context()
