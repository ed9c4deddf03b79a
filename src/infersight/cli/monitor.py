"""`infersight monitor`, `infersight exporter` and `infersight dashboards`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from infersight.cli._conventions import (
    api_key_env_option,
    api_key_file_option,
    command_help,
    duration_option,
    out_option,
    port_option,
)
from infersight.core.errors import ConfigError

if TYPE_CHECKING:
    from infersight.telemetry import ExporterServer, Telemetry

# In the commands, not here: monitor, telemetry (~0.3-0.4 s each) would slow `--help`.

__all__ = ["register"]

_MONITOR_HELP = command_help(
    "Live view of an engine, its host and GPUs.",
    "Queue, throughput, latency and errors of the engine beside GPU and host load, with "
    "five minutes of history as sparklines (busy, running R of the slots S, waiting Q, "
    "tokens/s, TTFT where the engine exports it) and the server's processes (CPU, RSS). "
    "The view fits the terminal's width and height.",
    "URL is the engine or gateway root (vLLM, SGLang, TGI, llama.cpp or the infersight "
    "gateway; the kind is detected from its /metrics). Without a URL, the embedded "
    "engine (127.0.0.1:8000) or the gateway (127.0.0.1:8090) is used if one answers. "
    "On a terminal the view redraws in place (q or Ctrl-C quits); piped, it prints one "
    "frame per interval.",
    examples=[
        "infersight monitor",
        "infersight monitor http://10.0.0.5:8000 --record session.jsonl",
        "infersight monitor http://127.0.0.1:8000 --process loadgen=4242 --once",
    ],
)

_EXPORTER_HELP = command_help(
    "Prometheus exporter for GPU (NVML), host and engine metrics.",
    "Serves /metrics (stable infersight_* names) and /health on 127.0.0.1 by default; a "
    "scrape renders cached samples refreshed every --interval, so it never waits on an "
    "engine. Pass engine URLs to scrape and normalise; without one, the embedded engine "
    "or gateway on its default port is included if it answers.",
    examples=[
        "infersight exporter --port 9400",
        "infersight exporter http://127.0.0.1:8000 http://127.0.0.1:8090",
        "infersight exporter http://127.0.0.1:8000 --process engine=1234",
    ],
)

_DASHBOARDS_HELP = command_help(
    "Print the shipped Grafana dashboard or Prometheus alert rules.",
    "WHAT is grafana (dashboard JSON), alerts (rules YAML) or alerts-test (promtool "
    "unit tests of the rules).",
    examples=[
        "infersight dashboards grafana > infersight.json",
        "infersight dashboards alerts --out /etc/prometheus/infersight.rules.yml",
        "infersight dashboards alerts-test > alerts_test.yml",
    ],
)


def _processes(items: list[str] | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items or []:
        name, sep, pid = item.partition("=")
        if not sep or not name or not pid.isdigit():
            raise ConfigError(f"--process wants NAME=PID, got {item!r}")
        out[name] = int(pid)
    return out


def _api_key(env: str | None, file: Path | None) -> str | None:
    if not env and not file:
        return None
    from infersight.client import resolve_api_key

    return resolve_api_key(env=env, file=None if file is None else str(file))


# The options monitor and exporter share.
_INTERVAL: Any = duration_option(
    None, "--interval", help="Time between samples.", show_default="1s"
)
_PROCESS: Any = typer.Option(
    None, metavar="NAME=PID", help="Watch a process's CPU and memory (repeatable)."
)
_GPU: Any = typer.Option(
    None, "--gpu/--no-gpu", help="Sample GPUs through NVML.", show_default="--gpu"
)


def _interval(v: float | None, default: float) -> float:
    if v is None:
        return default
    if not 0.05 <= v <= 3600:
        raise ConfigError(f"--interval must be between 0.05 and 3600 seconds, got {v}")
    return v


def monitor(
    url: str = typer.Argument(None, metavar="URL", help="Engine or gateway root URL."),
    interval: float = _INTERVAL,
    record: Path = out_option(
        None, "--record", help="Append every sample to this JSONL file (read it with diagnose)."
    ),
    process: list[str] = _PROCESS,
    gpu: bool = _GPU,
    api_key_env: str = api_key_env_option(),
    api_key_file: Path = api_key_file_option(),
    duration: float = duration_option(None, "--duration", help="Stop after this long."),
    once: bool = typer.Option(False, help="Print one snapshot and exit."),
) -> None:
    from infersight.monitor import default_url, run_monitor
    from infersight.telemetry.settings import load_settings

    cfg = load_settings()
    target = url or default_url(cfg.default_urls())
    result = asyncio.run(
        run_monitor(
            target,
            interval=_interval(interval, cfg.interval),
            record=record,
            processes=_processes(process),
            gpu=cfg.gpu if gpu is None else gpu,
            api_key=_api_key(api_key_env, api_key_file),
            duration=duration,
            once=once,
            scrape_timeout=cfg.scrape_timeout,
        )
    )
    if result.record is not None:
        typer.echo(
            f"recorded {result.samples} samples in {result.rounds} rounds to {result.record}"
        )


def exporter(
    urls: list[str] = typer.Argument(
        None, metavar="URL", help="Engine or gateway root URLs to scrape."
    ),
    host: str = typer.Option(None, help="Address to listen on.", show_default="127.0.0.1"),
    port: int = port_option(
        None, help="Port to listen on; 0 picks a free one.", show_default="9400"
    ),
    interval: float = _INTERVAL,
    process: list[str] = _PROCESS,
    gpu: bool = _GPU,
    api_key_env: str = api_key_env_option(),
    api_key_file: Path = api_key_file_option(),
) -> None:
    from infersight.telemetry.settings import load_settings

    cfg = load_settings()
    host = host or cfg.exporter_host
    if host not in ("127.0.0.1", "localhost", "::1"):
        typer.echo(f"warning: serving metrics on {host} without authentication", err=True)
    targets = list(urls or [])
    if not targets:
        from infersight.monitor import default_url

        try:
            targets = [default_url(cfg.default_urls())]
        except ConfigError:
            typer.echo(
                "no engine URL given and none on the default ports: "
                "exporting GPU and host metrics only",
                err=True,
            )
    from infersight.telemetry import run_exporter

    asyncio.run(
        run_exporter(
            targets,
            host=host,
            port=cfg.exporter_port if port is None else port,
            interval=_interval(interval, cfg.interval),
            processes=_processes(process),
            gpu=cfg.gpu if gpu is None else gpu,
            api_key=_api_key(api_key_env, api_key_file),
            scrape_timeout=cfg.scrape_timeout,
            on_ready=_exporter_ready,
        )
    )


def dashboards(
    what: str = typer.Argument(..., metavar="WHAT", help="grafana, alerts or alerts-test."),
    out: Path = out_option(None, help="Write to this file instead of stdout."),
) -> None:
    from infersight.telemetry import dashboards as d

    getters = {
        "grafana": d.grafana_dashboard,
        "alerts": d.alert_rules,
        "alerts-test": d.alert_rules_tests,
    }
    if what not in getters:
        raise ConfigError(f"unknown dashboard {what!r}; choose one of {', '.join(getters)}")
    text = getters[what]()
    if out is None:
        typer.echo(text, nl=False)
        return
    from infersight.report import write_text

    try:
        write_text(out, text)
    except OSError as e:
        raise ConfigError(f"cannot write {out}: {e.strerror}") from None
    typer.echo(f"wrote {out}", err=True)


def register(app: typer.Typer) -> None:
    """Add ``monitor``, ``exporter`` and ``dashboards`` to the app."""
    app.command("monitor", help=_MONITOR_HELP)(monitor)
    app.command("exporter", help=_EXPORTER_HELP)(exporter)
    app.command("dashboards", help=_DASHBOARDS_HELP)(dashboards)


def _exporter_ready(srv: ExporterServer, tel: Telemetry) -> None:
    typer.echo(f"infersight exporter: {srv.url}/metrics  (health: {srv.url}/health)", err=True)
    for scraper in tel.scrapers:
        typer.echo(f"  scraping {scraper.url}", err=True)
    if tel.gpu_note:
        typer.echo(f"  {tel.gpu_note}", err=True)
