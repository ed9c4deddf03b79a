"""The Grafana dashboard and Prometheus alert rules shipped in the package, a PromQL
metric-name extractor, and which engines can fill each panel and fire each alert (from
the engine table), used to check them against what is really exported."""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

import yaml

from infersight.core.engines import engine_specs
from infersight.telemetry.exporter.names import EXPORTED

__all__ = [
    "alert_engines",
    "alert_expressions",
    "alert_rules",
    "alert_rules_tests",
    "dashboard_expressions",
    "dashboard_panels",
    "engine_signals",
    "grafana_dashboard",
    "panel_engines",
    "promql_metric_names",
    "sample_names",
]

_DIR = "telemetry"


def _read(name: str) -> str:
    return resources.files("infersight.data").joinpath(f"{_DIR}/{name}").read_text()


def grafana_dashboard() -> str:
    """The Grafana dashboard JSON (import it, pick the Prometheus data source)."""
    return _read("grafana_dashboard.json")


def alert_rules() -> str:
    """The Prometheus alert rules YAML (``rule_files:`` in prometheus.yml)."""
    return _read("alerts.yml")


def alert_rules_tests() -> str:
    """promtool unit tests for the alert rules (``promtool test rules``)."""
    return _read("alerts_test.yml")


def dashboard_expressions(doc: dict[str, Any] | None = None) -> list[str]:
    """Every PromQL expression in the dashboard (panel targets and query variables)."""
    d = doc if doc is not None else json.loads(grafana_dashboard())
    out: list[str] = []

    def walk(panels: list[dict[str, Any]]) -> None:
        for p in panels:
            out.extend(t["expr"] for t in p.get("targets", []) if t.get("expr"))
            walk(p.get("panels", []))

    walk(d.get("panels", []))
    for v in d.get("templating", {}).get("list", []):
        q = v.get("query")
        if v.get("type") == "query" and isinstance(q, dict) and q.get("query"):
            out.append(str(q["query"]))
    return out


def alert_expressions() -> list[str]:
    """Every ``expr`` of the shipped alert rules."""
    doc = yaml.safe_load(alert_rules())
    return [str(r["expr"]) for g in doc["groups"] for r in g["rules"]]


_KEYWORDS = {
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "inf",
    "nan",
}
_IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def promql_metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression selects (functions, keywords, label names,
    durations and Grafana variables are not metric names)."""
    s = re.sub(r"label_values\([^)]*\)", "", expr)  # handled below
    s = re.sub(r'"(?:[^"\\]|\\.)*"', '""', s)  # string literals
    s = re.sub(r"\{[^}]*\}", "", s)  # label matchers
    s = re.sub(r"\[[^\]]*\]", "", s)  # range selectors
    s = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", s)
    s = re.sub(r"\$\{?\w+\}?", "", s)  # Grafana variables
    names: set[str] = set()
    for m in _IDENT.finditer(s):
        word = m.group(0)
        rest = s[m.end() :].lstrip()
        if rest.startswith("("):
            continue  # a function call
        if word.lower() in _KEYWORDS:
            continue
        if m.start() > 0 and (s[m.start() - 1].isdigit() or s[m.start() - 1] == "."):
            continue  # part of a number like 1e3
        names.add(word)
    # label_values(metric, label): the first argument is a metric name
    for m in re.finditer(r"label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,", expr):
        names.add(m.group(1))
    return names


def _prometheus_to_sample() -> dict[str, str]:
    out: dict[str, str] = {}
    for sample, forms in EXPORTED.items():
        for e in forms:
            out[e.name] = sample
            if e.kind == "histogram":
                out.update({e.name + sfx: sample for sfx in ("_bucket", "_sum", "_count")})
    return out


def sample_names(expr: str) -> set[str]:
    """The exporter's sample names (``engine.ttft_seconds``) a PromQL expression reads."""
    table = _prometheus_to_sample()
    return {table[n] for n in promql_metric_names(expr) if n in table}


def engine_signals(engine: str) -> set[str]:
    """Engine sample names a current release of ``engine`` gives the exporter: the
    engine table's names that are not ``legacy``, plus what the scraper adds (``up``,
    the scrape time, and the slot limit where the engine has an info endpoint)."""
    spec = engine_specs()[engine]
    out = {r.name for rules in spec.metrics.values() for r in rules if r.legacy is None}
    out |= {"engine.up", "engine.scrape_duration_seconds"}
    if spec.slots:
        out.add("engine.slots")
    return out


def _fills(expr: str, engine: str) -> bool:
    names = {n for n in sample_names(expr) if n.startswith("engine.")}
    return bool(names) and names <= engine_signals(engine)


def dashboard_panels(doc: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The dashboard's panels, rows left out (and their nested panels included)."""
    d = doc if doc is not None else json.loads(grafana_dashboard())
    out: list[dict[str, Any]] = []
    for p in d.get("panels", []):
        out.extend(p.get("panels", []) if p.get("type") == "row" else [p])
    return out


def panel_engines(panel: dict[str, Any]) -> list[str]:
    """Engines (keys of the engine table) that fill at least one of the panel's engine
    queries: every engine series that query reads is one they export."""
    exprs = [str(t["expr"]) for t in panel.get("targets", []) if t.get("expr")]
    return [key for key in engine_specs() if any(_fills(e, key) for e in exprs)]


def alert_engines(expr: str) -> list[str]:
    """Engines an alert expression can fire for: those exporting every engine series of
    its left side, less those exporting the series of an ``unless`` (scoping) clause."""
    lhs, scope = (*re.split(r"\bunless\b", expr, maxsplit=1), "")[:2]
    return [
        key for key in engine_specs() if _fills(lhs, key) and not (scope and _fills(scope, key))
    ]
