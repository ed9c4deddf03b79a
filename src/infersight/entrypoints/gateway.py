"""``infersight gateway`` as functions: the config from file, environment and flags,
and the gateway in front of its upstreams, or of the embedded engine when it has none
(the default local stack, engine + gateway; ``serve --gateway`` builds the same)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import SecretStr

from infersight.core.endpoint import Endpoint
from infersight.core.errors import ConfigError
from infersight.core.listen import check_can_listen
from infersight.entrypoints.engine import EngineOptions, endpoint, internal_key
from infersight.gateway import serve
from infersight.gateway.config import (
    GatewayConfig,
    KeyConfig,
    LimiterKind,
    UpstreamConfig,
    hash_key,
    load_config,
    parse_upstream_flag,
)

if TYPE_CHECKING:
    from infersight.gateway.server import Gateway

__all__ = ["engine_upstream", "fronting_engine", "gateway_config", "key_name", "run_gateway"]


def gateway_config(
    config: Path | None,
    upstream: Sequence[str] = (),
    *,
    host: str | None = None,
    port: int | None = None,
    concurrency: int | None = None,
    queue: int | None = None,
    adaptive: bool = False,
    deadline: float | None = None,
    ttft_timeout: float | None = None,
    prices: Path | None = None,
    no_access_log: bool = False,
    client_key: str | None = None,
    client_key_name: str = "cli",
) -> GatewayConfig:
    """The config file, then ``INFERSIGHT_GATEWAY_*``, then the flags. The per-upstream
    flags apply to every upstream; with none, ``concurrency``/``queue``/``adaptive``
    size the embedded engine and its limit instead. ``client_key`` is a key clients
    must send, added to the config's keys (only its hash is kept) under
    ``client_key_name`` (see :func:`key_name`), the name metrics and logs show."""
    if config is not None and not config.exists():
        raise ConfigError(f"--config {config}: no such file")
    overrides: dict[str, Any] = {
        "host": host,
        "port": port,
        "default_deadline_s": deadline,
        "prices_file": str(prices) if prices else None,
        "access_log": False if no_access_log else None,
    }
    cfg = load_config(config, **overrides)
    ups = [u.model_dump() for u in cfg.upstreams] + [parse_upstream_flag(u) for u in upstream]
    for u in ups:
        if concurrency is not None:
            u["concurrency"] = concurrency
        if queue is not None:
            u["queue"] = queue
        if adaptive:
            u["limiter"] = "gradient"
        if ttft_timeout is not None:
            u["ttft_timeout_s"] = ttft_timeout
    extra: dict[str, Any] = {"upstreams": ups}
    if client_key:
        if any(k.name == client_key_name for k in cfg.keys):
            raise ConfigError(
                f"the config already has a key named {client_key_name!r}: "
                "rename it, or give the key in the config only"
            )
        extra["keys"] = [*cfg.keys, KeyConfig(name=client_key_name, sha256=hash_key(client_key))]
        extra["require_key"] = True
    if not ups:  # the embedded engine: --concurrency is also its slot count
        extra.update(
            engine_parallel=concurrency,
            engine_queue=queue,
            engine_limiter="gradient" if adaptive else None,
        )
    return load_config(config, **overrides, **extra)


def key_name(env: str | None, file: str | Path | None) -> str:
    """The name a key given on the command line goes by in metrics, logs and
    ``/stats``: its environment variable (``GATEWAY_KEY``), else ``file:NAME``."""
    if env:
        return env
    if file:
        return f"file:{Path(file).name}"
    return "cli"


def engine_upstream(
    ep: Endpoint, *, limiter: LimiterKind = "static", queue: int | None = None
) -> UpstreamConfig:
    """The upstream for the embedded engine this command started, sized by its slots,
    with the engine's key (its internal one: see
    :func:`~infersight.entrypoints.engine.internal_key`); the gateway serves its own
    endpoints and applies its request checks (``embedded``)."""
    slots = ep.slots or 1
    return UpstreamConfig(
        name="engine",
        url=ep.url,
        api_key=SecretStr(ep.api_key) if ep.api_key else None,
        models=[ep.model] if ep.model else [],
        # The engine has `slots` slots: a deeper limit would only queue inside it,
        # where the gateway can neither see nor shed the wait.
        concurrency=slots,
        max_concurrency=max(slots * 4, 8),
        limiter=limiter,
        queue=queue if queue is not None else slots * 8,
        embedded=True,
    )


@contextlib.contextmanager
def fronting_engine(
    cfg: GatewayConfig, *, on_start: Callable[[], object] | None = None
) -> Iterator[GatewayConfig]:
    """``cfg`` as it is when it names upstreams; else the embedded engine, started for
    the ``with`` block, as its one upstream."""
    if cfg.upstreams:
        yield cfg
        return
    # The engine is private to the gateway: loopback, and a key only the gateway holds.
    opts = EngineOptions(parallel=cfg.engine_parallel, ctx=cfg.engine_ctx, api_key=internal_key())
    with endpoint(None, opts, command="gateway", on_start=on_start) as ep:
        up = engine_upstream(ep, limiter=cfg.engine_limiter, queue=cfg.engine_queue)
        yield cfg.model_copy(update={"upstreams": [up]})


def run_gateway(
    cfg: GatewayConfig,
    *,
    on_ready: Callable[[Gateway], object] | None = None,
    on_start: Callable[[], object] | None = None,
) -> None:
    """Serve ``cfg`` (fronting the embedded engine when it has no upstream) until
    SIGINT/SIGTERM. ``on_ready(gateway)`` runs once it listens."""
    check_can_listen(cfg.host, cfg.port)  # a taken port: one line, before the engine starts
    with fronting_engine(cfg, on_start=on_start) as real:
        serve(real, on_ready)
