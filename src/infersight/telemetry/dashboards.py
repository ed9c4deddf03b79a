"""The Grafana dashboard and Prometheus alert rules shipped in the package, and a
PromQL metric-name extractor used to check them against what is really exported."""

from __future__ import annotations

import json
import re
from importlib import resources
from typing import Any

__all__ = [
    "alert_expressions",
    "alert_rules",
    "alert_rules_tests",
    "dashboard_expressions",
    "grafana_dashboard",
    "promql_metric_names",
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
    import yaml

    doc = yaml.safe_load(alert_rules())
    return [str(r["expr"]) for g in doc["groups"] for r in g["rules"]]


_KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or",
    "unless", "bool", "offset", "inf", "nan",
}  # fmt: skip
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
