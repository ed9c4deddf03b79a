"""``infersight predict RUN``: the run's fitted model at other knobs or loads."""

from __future__ import annotations

from pathlib import Path

import orjson
import typer

from infersight.cli._conventions import command_help
from infersight.cli._fail import fail
from infersight.core.errors import ConfigError
from infersight.core.records import load_run_result

# In the command, not here: servermodel.predict adds ~0.4 s to `infersight --help`.

__all__ = ["register"]

_HELP = command_help(
    "Predict a saved run's server at other knobs or loads.",
    "The run's fitted model (slots, KV, a FIFO queue and the engine's step time) is read "
    "from the RunResult, or fitted to it. Every figure "
    "comes with the error the model measured on the run itself (leaving one level out), "
    "and a setting that runs more sequences than the run had is marked an estimate, "
    "with its low end: the figures if compute saturated at the measured top.",
    examples=[
        "infersight predict runs/a/result.json --slots 32",
        "infersight predict runs/a/result.json --rate 20 --replicas 3 --json",
        "infersight predict runs/a/result.json --concurrency 64 --max-tokens 512",
    ],
)


def predict_cmd(
    run: Path = typer.Argument(..., metavar="RUN", help="A RunResult JSON file (bench --out)."),
    slots: int = typer.Option(None, metavar="N", help="The engine's slot limit."),
    rate: float = typer.Option(None, metavar="NUMBER", help="Open loop: requests/s (Poisson)."),
    concurrency: int = typer.Option(
        None, metavar="N", help="Closed loop: requests kept in flight (one per client)."
    ),
    replicas: int = typer.Option(None, metavar="N", help="Replicas sharing the load evenly."),
    max_tokens: int = typer.Option(None, metavar="N", help="Cap on output tokens per request."),
    kv_tokens: float = typer.Option(
        None, metavar="TOKENS", help="The engine's KV cache size in tokens (where KV was known)."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the prediction as JSON."),
) -> None:
    from infersight.servermodel.predict import forecast

    try:
        fc = forecast(
            load_run_result(run),
            slots=slots,
            rate=rate,
            concurrency=concurrency,
            replicas=replicas,
            max_tokens=max_tokens,
            kv_tokens=kv_tokens,
        )
    except ConfigError as e:
        raise fail(str(e)) from None
    if as_json:
        typer.echo(orjson.dumps(fc.to_dict(), option=orjson.OPT_INDENT_2).decode())
        return
    p, err = fc.prediction, fc.error
    setting = ", ".join(f"{k} {v:g}" for k, v in fc.setting.items() if v is not None)
    typer.echo(f"predicted at {setting} ({fc.basis}):")
    for name, key, v, unit in (
        ("throughput", "throughput", p.throughput, "req/s"),
        ("goodput", "", p.goodput, "req/s"),
        ("TTFT p50", "ttft_p50", p.ttft_p50, "s"),
        ("TTFT p99", "", p.ttft_p99, "s"),
        ("TPOT p50", "tpot_p50", p.tpot_p50, "s"),
        ("e2e p50", "", p.e2e_p50, "s"),
        ("e2e p99", "", p.e2e_p99, "s"),
        ("running", "", p.running, ""),
        ("waiting", "", p.waiting, ""),
    ):
        if v is None:
            continue
        er = err.get(key) if key else None
        shown = f"{v * 1000:.1f} ms" if unit == "s" else f"{v:.3g} {unit}".rstrip()
        told = f"{er:.0%}" if er is not None else "not checked"
        lo_hi = fc.ranges.get(key) if key else None
        if lo_hi is not None and lo_hi[0] is not None and lo_hi[1] is not None:
            k = 1000.0 if unit == "s" else 1.0
            wide = f", {lo_hi[1] / lo_hi[0]:.2g}× wide" if lo_hi[0] > 0 else ""
            told += (
                f" (range {lo_hi[0] * k:.3g}–{lo_hi[1] * k:.3g}{' ms' if unit == 's' else ''}"
                f"{wide})"
            )
        typer.echo(f"  {name:<11} {shown:>12}   model error {told}")
    if fc.checked_on:
        said = fc.checked_on
        typer.echo(said if said.startswith("not checked") else f"checked on: {said}")
    for n in fc.notes:
        typer.echo(f"note: {n}")


def register(app: typer.Typer) -> None:
    """Add ``predict`` to the app."""
    app.command("predict", help=_HELP)(predict_cmd)
