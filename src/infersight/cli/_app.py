"""Builds the Typer app and runs it with one-line errors instead of tracebacks."""

from __future__ import annotations

import importlib
import os
import sys

import typer

from infersight import __version__
from infersight.cli._conventions import MAX_WIDTH, apply_conventions
from infersight.cli._help_format import Group
from infersight.core.errors import InfersightError

__all__ = ["app", "main"]

#: Command modules, each exposing ``register(app: typer.Typer) -> None``.
COMMAND_MODULES = (
    "serve",
    "bench",
    "tune",
    "gateway",
    "monitor",
    "diagnose",
    "predict",
    "report",
    "batch",
)

app = typer.Typer(
    name="infersight",
    cls=Group,
    help="Find out why LLM inference is slow, idle or expensive, and fix it.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    # Plain help (click's formatter): rich markup would turn `uniform:A:B` into emoji,
    # eat `[default]` and cut long syntax with an ellipsis (cli/_conventions.py).
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": MAX_WIDTH},
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"infersight {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version_callback, is_eager=True, help="Print the version."
    ),
) -> None:
    """infersight: measure, diagnose and fix LLM inference."""


for _name in COMMAND_MODULES:
    importlib.import_module(f"infersight.cli.{_name}").register(app)
apply_conventions(app)


def main() -> None:
    """Entry point: run the app; map every failure to one line and a non-zero exit."""
    debug = bool(os.environ.get("INFERSIGHT_DEBUG"))
    try:
        app(standalone_mode=True)
    except InfersightError as e:
        if debug:
            raise
        typer.echo(f"error: {e}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
    except Exception as e:  # last line of defence: never a traceback
        if debug:
            raise
        typer.echo(
            f"error: unexpected {type(e).__name__}: {e} (set INFERSIGHT_DEBUG=1 for details)",
            err=True,
        )
        sys.exit(1)
