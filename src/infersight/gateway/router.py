"""Routing: which upstreams, in which order, may serve a request for a model.

The order is:
1. the cost rule's cheaper model, when the request's estimated tokens are under the
   rule's threshold;
2. the requested model;
3. its fallback chain (model A, then B...).

Within one model, the replicas are ordered by least outstanding requests (in flight +
queued, relative to their limit), ties rotated so equal replicas share the load. While
a replica's recent errors lower its weight (:mod:`.upstream_health`), the order is
drawn at random instead, each replica first with a probability in proportion to its
weight divided by (1 + its load): a failing replica gets fewer new requests.
Upstreams whose circuit is open are left out; if that leaves nothing, the caller
learns when the first probe will be allowed.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from infersight.gateway.config import CostRule
from infersight.gateway.upstream_health import weighted_order

__all__ = ["Candidate", "Routable", "Router"]


class Routable(Protocol):
    """What the router needs to know about an upstream."""

    name: str

    def serves(self, model: str) -> bool: ...
    def load(self) -> float: ...
    def weight(self) -> float: ...
    def available(self) -> bool: ...
    def seconds_until_probe(self) -> float: ...


@dataclass(frozen=True, slots=True)
class Candidate:
    upstream: Routable
    #: The model name to send upstream.
    model: str
    #: True when this is not the model the client asked for.
    fallback: bool


class Router:
    """Orders upstream candidates for a model; see the module docstring."""

    def __init__(
        self,
        upstreams: Sequence[Routable],
        fallbacks: Mapping[str, Sequence[str]] | None = None,
        cost_rules: Sequence[CostRule] = (),
    ) -> None:
        self.upstreams = list(upstreams)
        self.fallbacks = {k: list(v) for k, v in (fallbacks or {}).items()}
        self.cost_rules = {r.model: r for r in cost_rules}
        self._rr = itertools.count()
        #: chain() per (model, cheaper model or None): fallbacks and rules never change.
        self._chains: dict[tuple[str, str | None], list[str]] = {}

    def chain(self, model: str, estimated_tokens: int | None = None) -> list[str]:
        """Models to try, in order (cost rule, requested, fallbacks), without repeats."""
        rule = self.cost_rules.get(model)
        cheaper = None
        if (
            rule is not None
            and estimated_tokens is not None
            and estimated_tokens <= rule.max_tokens
        ):
            cheaper = rule.cheaper
        key = (model, cheaper)
        found = self._chains.get(key)
        if found is None:
            if len(self._chains) >= 4096:  # bounded: clients choose the model names
                self._chains.clear()
            found = self._chains[key] = self._chain(model, cheaper)
        return list(found)

    def _chain(self, model: str, cheaper: str | None) -> list[str]:
        out: list[str] = [] if cheaper is None else [cheaper]
        out.append(model)
        seen = set(out)
        queue = list(self.fallbacks.get(model, ()))
        while queue:  # fallbacks of fallbacks, breadth first, cycles ignored
            m = queue.pop(0)
            if m not in seen:
                seen.add(m)
                out.append(m)
                queue.extend(self.fallbacks.get(m, ()))
        return out

    def known(self, model: str) -> bool:
        return any(u.serves(model) for u in self.upstreams)

    def replicas(self, model: str) -> list[Routable]:
        """Upstreams serving ``model`` with a closed/probing circuit, least loaded first
        (or weighted at random while one's errors lower its weight)."""
        ups = [u for u in self.upstreams if u.serves(model) and u.available()]
        if len(ups) > 1:
            weights = [u.weight() for u in ups]
            if min(weights) < 1.0:
                loads = [1.0 + u.load() for u in ups]
                return weighted_order(ups, [w / n for w, n in zip(weights, loads, strict=True)])
            k = next(self._rr) % len(ups)
            ups = ups[k:] + ups[:k]
            ups.sort(key=lambda u: u.load())  # stable: the rotation breaks ties
        return ups

    def candidates(self, model: str, estimated_tokens: int | None = None) -> list[Candidate]:
        out: list[Candidate] = []
        for m in self.chain(model, estimated_tokens):
            for u in self.replicas(m):
                out.append(Candidate(u, m, m != model))
        return out

    def probe_wait(self, model: str) -> float | None:
        """Seconds until some upstream of the chain accepts a probe (None: no upstream)."""
        waits = [
            u.seconds_until_probe()
            for m in self.chain(model)
            for u in self.upstreams
            if u.serves(m)
        ]
        return min(waits) if waits else None
