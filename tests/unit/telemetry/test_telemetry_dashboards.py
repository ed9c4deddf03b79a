"""The shipped dashboard and alert rules against the engine table: each engine panel
and each scoped alert says which engines have its signal, and says it right; GPU panels
say "no GPU" instead of drawing an empty chart."""

from __future__ import annotations

import yaml

from infersight.core.engines import engine_specs
from infersight.telemetry.dashboards import (
    alert_engines,
    alert_rules,
    alert_rules_tests,
    dashboard_panels,
    engine_signals,
    panel_engines,
    sample_names,
)


def _labels(keys: list[str]) -> str:
    return ", ".join(engine_specs()[k].label for k in keys)


def test_engine_panels_say_which_engines_fill_them() -> None:
    engine_panels = [p for p in dashboard_panels() if panel_engines(p) and p["type"] != "stat"]
    assert len(engine_panels) >= 10
    for p in engine_panels:
        want = f"Exported for: {_labels(panel_engines(p))}."
        assert p["description"].endswith(want), (p["title"], p["description"])
        assert p["fieldConfig"]["defaults"]["noValue"].startswith("no data"), p["title"]


def test_the_embedded_engine_fills_the_panels_llamacpp_has_signals_for() -> None:
    """llama.cpp's signals reach the queue, ITL, throughput and speed panels; what it
    lacks (KV in current builds, latency histograms, request counters) stays out."""
    filled = {p["title"] for p in dashboard_panels() if "llamacpp" in panel_engines(p)}
    for title in (
        "Queue depth: waiting, running, slot limit",
        "ITL and time per output token",
        "Token throughput",
        "Prefill and decode speed per sequence",
    ):
        assert title in filled
    assert "engine.kv_cache_usage" not in engine_signals("llamacpp")
    assert "KV-cache usage" not in filled


def test_gpu_panels_say_no_gpu() -> None:
    gpu = [
        p
        for p in dashboard_panels()
        if any(n.startswith("gpu.") for t in p.get("targets", []) for n in sample_names(t["expr"]))
    ]
    assert len(gpu) == 6
    for p in gpu:
        assert p["fieldConfig"]["defaults"]["noValue"] == "no GPU", p["title"]
    stat = next(p for p in dashboard_panels() if p["title"] == "GPUs")
    assert stat["type"] == "stat"
    mapping = stat["fieldConfig"]["defaults"]["mappings"][0]["options"]["0"]
    assert mapping["text"] == "no GPU"


def test_scoped_alerts_name_the_engines_that_can_fire_them() -> None:
    everyone = list(engine_specs())
    rules = [r for g in yaml.safe_load(alert_rules())["groups"] for r in g["rules"]]
    scoped = 0
    for r in rules:
        engines = alert_engines(str(r["expr"]))
        if engines and engines != everyone:
            scoped += 1
            assert r["annotations"].get("engines") == _labels(engines), r["alert"]
    assert scoped >= 5
    # what the embedded engine (llama.cpp) can fire
    llama = {r["alert"] for r in rules if "llamacpp" in alert_engines(str(r["expr"]))}
    assert "EngineRequestsQueuedContinuously" in llama


def test_every_alert_has_a_firing_promtool_case() -> None:
    rules = {r["alert"] for g in yaml.safe_load(alert_rules())["groups"] for r in g["rules"]}
    tests = yaml.safe_load(alert_rules_tests())["tests"]
    fired = {
        case["alertname"]
        for t in tests
        for case in t.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    assert rules - fired == set()
    assert 'job="infersight"' not in alert_rules()
