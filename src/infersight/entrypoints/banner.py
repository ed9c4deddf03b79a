"""The lines a server command prints once it listens: where, what it serves, whether a
key is needed, where its metrics are. ``serve`` and ``gateway`` print the same shape
(one ``listening on`` line, then aligned facts, then how to stop)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from infersight.core.endpoint import shown_url
from infersight.core.wording import counted

if TYPE_CHECKING:
    from infersight.gateway.server import Gateway

__all__ = ["gateway_banner", "startup_banner"]


def startup_banner(command: str, url: str, rows: Sequence[tuple[str, str]]) -> str:
    """``infersight COMMAND: listening on URL  (OpenAI API: URL/v1)``, the ``rows`` as
    aligned ``name  value`` lines, then ``Press Ctrl-C to stop.``"""
    width = max((len(k) for k, _ in rows), default=0)
    lines = [f"infersight {command}: listening on {url}  (OpenAI API: {url}/v1)"]
    lines += [f"  {k:<{width}}  {v}" for k, v in rows]
    lines.append("Press Ctrl-C to stop.")
    return "\n".join(lines)


def gateway_banner(gw: Gateway) -> str:
    """The gateway's banner: each upstream (address, models, limit), the models clients
    may ask for, whether a key is required, the metrics URL, the access log."""
    cfg = gw.config
    rows: list[tuple[str, str]] = []
    models: set[str] = set()
    any_model = False
    for u in gw.upstreams:
        c = u.cfg
        served = "any model" if u.wildcard else ", ".join(sorted(u.models))
        limit = f"{c.limiter} limit {c.concurrency}, queue {c.queue}"
        rows.append(("upstream", f"{u.name}={shown_url(c.url)}  ({served}; {limit})"))
        models |= u.models | set(c.model_map)
        any_model = any_model or u.wildcard
    names = sorted(models) + (["any other the upstreams serve"] if any_model else [])
    rows.append(("models", ", ".join(names) or "none"))
    if cfg.fallbacks:
        rows.append(
            ("fallbacks", "; ".join(f"{m} -> {', '.join(fs)}" for m, fs in cfg.fallbacks.items()))
        )
    if cfg.keys or cfg.require_key:
        who = ", ".join(k.name for k in cfg.keys)
        rows.append(
            (
                "api key",
                f"required ({counted(len(cfg.keys), 'key')}: {who})" if cfg.keys else "required",
            )
        )
    else:
        rows.append(("api key", "none (open access)"))
    public = cfg.metrics_public or not (cfg.keys or cfg.require_key)
    rows.append(("metrics", f"{gw.url}/metrics" + ("" if public else "  (with a key)")))
    rows.append(("health", f"{gw.url}/health"))
    rows.append(("access log", "stdout, one JSON line per request" if cfg.access_log else "off"))
    return startup_banner("gateway", gw.url, rows)
