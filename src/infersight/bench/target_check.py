"""Checking the server under test: the endpoint the caller gives, before any load.

Every failure here is turned into one clear line before any load is sent: an
unreachable URL, a rejected API key, a model the server does not serve, an endpoint
it does not offer. A given URL's own ``/metrics`` is scraped during the run when it
answers in Prometheus format (its engine is detected from the metric names, as
``monitor`` does), unless ``--no-scrape`` or an explicit ``--scrape URL`` says
otherwise. An engine the CLI started for the run is scraped without asking.
"""

from __future__ import annotations

from typing import Any

from infersight.bench.target import Target
from infersight.client import Client, RetryPolicy, Timeouts, resolve_api_key
from infersight.core import errors as E
from infersight.core.endpoint import Endpoint
from infersight.flags.bench import TargetSection, TelemetrySection
from infersight.telemetry import detect_engine, metrics_url, parse_metrics

__all__ = ["open_target"]

PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


def _given_key(cfg: TargetSection) -> tuple[str | None, str | None]:
    """(key, where it came from) from --api-key-env / --api-key-file."""
    key = resolve_api_key(env=cfg.api_key_env, file=cfg.api_key_file)
    source = (
        f"environment variable {cfg.api_key_env}"
        if cfg.api_key_env
        else (f"file {cfg.api_key_file}" if cfg.api_key_file else None)
    )
    return key, source


async def open_target(
    cfg: TargetSection, telemetry: TelemetrySection, endpoint: Endpoint
) -> Target:
    """Check the server at ``endpoint`` (one-line errors) and describe it; whether its
    ``/metrics`` is scraped follows ``telemetry``."""
    url = endpoint.url
    if endpoint.started:
        key, source = endpoint.api_key, None
        info: dict[str, Any] = {**endpoint.settings, "url": url, "started_by": endpoint.started_by}
    else:
        key, source = _given_key(cfg)
        info = {"url": url, "engine": "unknown"}
    target = Target(
        url, key, source, cfg.model or "", PATHS[cfg.endpoint], info, started=endpoint.started
    )
    client = Client(
        url,
        api_key=key,
        api_key_source=source,
        timeouts=Timeouts(connect=5.0, total=60.0),
        retry=RetryPolicy.none(),
    )
    async with client:
        await _check(cfg, telemetry, target, client, endpoint)
    if endpoint.started:
        target.engine_pid = endpoint.pid
        if not telemetry.no_scrape:
            target.metrics_url = f"{url}/metrics"
        target.slots = endpoint.slots
    return target


async def _check(
    cfg: TargetSection,
    telemetry: TelemetrySection,
    target: Target,
    client: Any,
    endpoint: Endpoint,
) -> None:
    url = target.base_url
    try:
        models = await client.models()
    except E.AuthError:
        raise
    except E.BadRequest:
        models = []  # no /v1/models here; the test request below checks the model
    except E.TransportError as e:
        raise E.ConfigError(str(e)) from None  # "cannot connect to HOST:PORT: why"
    except E.StatusError as e:
        raise E.ConfigError(f"{url}/v1/models answered HTTP {e.status}: {e}") from None
    if not target.model:
        if endpoint.model:
            target.model = endpoint.model
        elif models:
            target.model = models[0]
        else:
            raise E.ConfigError(f"{url} does not list its models; give --model")
    if models and target.model not in models:
        raise E.ConfigError(
            f"model {target.model!r} is not served by {url}; it serves: {', '.join(models)}"
        )
    # One tiny request on the real endpoint: checks the model, the endpoint and the key,
    # and opens a pooled connection before timing starts.
    body: dict[str, Any] = {"model": target.model, "max_tokens": 1, "stream": cfg.stream}
    if cfg.endpoint == "chat":
        body["messages"] = [{"role": "user", "content": "Hi"}]
    else:
        body["prompt"] = "Hi"
    try:
        await client.request(target.path, body)
    except E.AuthError:
        raise
    except E.StatusError as e:
        raise E.ConfigError(
            f"test request to {url}{target.path} with model {target.model!r} failed: {e}"
        ) from None
    except E.TransportError as e:
        raise E.ConfigError(f"test request to {url}{target.path} failed: {e}") from None
    if not target.started and not telemetry.no_scrape:
        await _find_metrics(telemetry, target, client)


async def _find_metrics(cfg: TelemetrySection, target: Target, client: Any) -> None:
    """Detect the engine from the target's /metrics and scrape it during the run."""
    url = metrics_url(target.base_url)
    try:
        status, data = await client.get("/metrics")
    except E.InfersightError as e:
        target.notes.append(f"no engine metrics: {url} did not answer ({e})")
        return
    if status != 200:
        target.notes.append(f"no engine metrics: {url} answered HTTP {status}")
        return
    try:
        series, hists = parse_metrics(data.decode("utf-8", "replace"))
    except E.MalformedStream as e:
        target.notes.append(f"no engine metrics: {url} is not Prometheus text ({e})")
        return
    names = {s.name for s in series} | {h.family for h in hists}
    if not names:
        target.notes.append(f"no engine metrics: {url} exports no metric")
        return
    engine = detect_engine(names) or "unknown"
    target.engine_info["engine"] = engine
    if cfg.scrape:
        return  # the user chose what to scrape
    target.metrics_url = url
    target.notes.append(
        f"scraping the target's own metrics at {url} (engine: {engine}); --no-scrape turns it off"
    )
