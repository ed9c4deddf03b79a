"""The engine table (``data/telemetry/engines.toml``): for each serving engine, the
names of its Prometheus metrics, where its slot limit can be read and the setting that
controls it.

It is plain data shared by telemetry (which normalises an engine's ``/metrics`` with
it), diagnose (whose fixes name the engine's own settings) and monitor (labels).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

__all__ = ["EngineSpec", "MetricRule", "engine_specs"]


@dataclass(frozen=True, slots=True)
class MetricRule:
    name: str
    agg: str = "sum"
    scale: float = 1.0
    part: str | None = None
    #: Only series whose labels equal these values.
    match: tuple[tuple[str, str], ...] = ()
    #: Not series whose labels equal any of these values.
    exclude: tuple[tuple[str, str], ...] = ()
    #: The versions that export this name when current releases no longer do.
    legacy: str | None = None
    #: Read the value from this label (an info metric, whose value is 1).
    value_label: str | None = None

    def applies(self, labels: dict[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match) and not any(
            labels.get(k) == v for k, v in self.exclude
        )


@dataclass(frozen=True, slots=True)
class EngineSpec:
    key: str
    label: str
    detect: tuple[str, ...]
    checked_against: str
    slot_setting: str
    slots: tuple[tuple[str, str], ...]
    metrics: dict[str, tuple[MetricRule, ...]] = field(default_factory=dict)
    #: The settings that size the KV cache, in tokens where the engine has one
    #: (diagnose's KV fix names them with the model's number).
    kv_setting: str = ""

    def rules_for(self, labels: dict[str, str], *names: str) -> list[MetricRule] | None:
        """The rules of the first listed spelling, filtered by labels; None when the
        metric is not in the table at all."""
        for n in names:
            rules = self.metrics.get(n)
            if rules is not None:
                return [r for r in rules if r.applies(labels)]
        return None


def _rule(v: Any) -> MetricRule:
    if isinstance(v, str):
        return MetricRule(v)
    return MetricRule(
        name=str(v["name"]),
        agg=str(v.get("agg", "sum")),
        scale=float(v.get("scale", 1.0)),
        part=v.get("part"),
        match=tuple(sorted((str(k), str(x)) for k, x in v.get("match", {}).items())),
        exclude=tuple(sorted((str(k), str(x)) for k, x in v.get("exclude", {}).items())),
        legacy=None if v.get("legacy") is None else str(v["legacy"]),
        value_label=None if v.get("value_label") is None else str(v["value_label"]),
    )


def _rules(v: Any) -> tuple[MetricRule, ...]:
    return tuple(_rule(x) for x in v) if isinstance(v, list) else (_rule(v),)


@lru_cache(maxsize=1)
def engine_specs() -> dict[str, EngineSpec]:
    """The engine table shipped in the package, keyed by engine id."""
    text = resources.files("infersight.data").joinpath("telemetry/engines.toml").read_text()
    doc = tomllib.loads(text)
    out: dict[str, EngineSpec] = {}
    for key, t in doc.items():
        out[key] = EngineSpec(
            key=key,
            label=str(t.get("label", key)),
            detect=tuple(t.get("detect", ())),
            checked_against=str(t.get("checked_against", "")),
            slot_setting=str(t.get("slot_setting", "")),
            slots=tuple((str(s["path"]), str(s["field"])) for s in t.get("slots", ())),
            metrics={k: _rules(v) for k, v in t.get("metrics", {}).items()},
            kv_setting=str(t.get("kv_setting", "")),
        )
    return out
