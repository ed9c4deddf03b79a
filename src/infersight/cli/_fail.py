"""One ``error:`` line on stderr and a non-zero exit: how every command fails."""

from __future__ import annotations

import typer

__all__ = ["fail"]


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print one clear ``error:`` line on stderr; return an Exit to raise."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)
