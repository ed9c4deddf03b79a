"""The ``--prometheus`` options shared by ``diagnose`` and ``report``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from infersight.entrypoints.prometheus import FleetQuery

# entrypoints is imported in fleet_query: at the top it adds ~1.8 s to `infersight --help`.

__all__ = ["END", "HTTP_CONFIG", "PROMETHEUS", "SELECTOR", "SINCE", "START", "STEP", "fleet_query"]

PROMETHEUS: Any = typer.Option(
    None,
    "--prometheus",
    metavar="URL",
    help="Diagnose every replica from this Prometheus (server root URL) over a range, "
    "instead of files: engines (vLLM, SGLang, TGI, llama.cpp), dcgm-exporter and "
    "infersight's exporter are found by their metric names.",
)
SINCE: Any = typer.Option(
    None,
    "--since",
    metavar="DURATION",
    show_default="1h",
    help="With --prometheus: the last DURATION (15m, 1h, 1h30m, 2d).",
)
START: Any = typer.Option(
    None,
    "--start",
    metavar="TIME",
    help="With --prometheus: range start, RFC 3339 (UTC without an "
    "offset), a Unix timestamp or now-2h.",
)
END: Any = typer.Option(
    None,
    "--end",
    metavar="TIME",
    show_default="now",
    help="With --prometheus: range end, as --start.",
)
STEP: Any = typer.Option(
    "15s", "--step", metavar="DURATION", help="With --prometheus: query resolution (15s, 1m)."
)
SELECTOR: Any = typer.Option(
    None,
    "--selector",
    metavar="MATCHERS",
    help="With --prometheus: label matchers for the engines' series, e.g. '{namespace=\"llm\"}'.",
)
HTTP_CONFIG: Any = typer.Option(
    None,
    "--http-config",
    metavar="FILE",
    help="With --prometheus: auth and TLS as Prometheus' http_config YAML (basic_auth, "
    "authorization, tls_config).",
    show_default="INFERSIGHT_PROMETHEUS_* variables",
)


def fleet_query(
    url: str,
    *,
    since: str | None,
    start: str | None,
    end: str | None,
    step: str,
    selector: str | None,
    http_config: Path | None,
    window: float | None,
) -> FleetQuery:
    from infersight.entrypoints.prometheus import FleetQuery

    return FleetQuery(
        url=url,
        since=since,
        start=start,
        end=end,
        step=step,
        selector=selector or "",
        window=window,
        http_config=http_config,
    )
