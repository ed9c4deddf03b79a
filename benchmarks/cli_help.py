"""`infersight COMMAND --help` with the project's plain formatter against typer's rich one.

Both render every command's help in this one process, side by side, at 80 and 120
columns. Per renderer and width:

- ms/help: median time to render one command's help (what `--help` costs after import);
- emoji: symbols rich's emoji codes made of the text (``:A:`` -> 🅰);
- cut: options whose help text does not appear whole (an ellipsis, a word broken
  across lines, markup eaten such as ``[default]``);
- typenames: Python type names shown as the value (``<list[str]>``, ``<int>``);
- long: lines wider than the terminal.

The ratio column is rich's time over plain's (above 1: plain is faster).

Usage: python benchmarks/cli_help.py [--quick] [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import time
import unicodedata
from typing import Any

import typer
from typer.main import get_command
from typer.testing import CliRunner

from infersight.cli import app


def render(rich: bool, cmd: str, width: int) -> str:
    app.rich_markup_mode = "rich" if rich else None
    try:
        os.environ["COLUMNS"] = str(width)
        return CliRunner().invoke(app, [cmd, "--help"], terminal_width=width).output
    finally:
        app.rich_markup_mode = None


def flaws(text: str, params: list[Any], width: int) -> tuple[int, int, int, int]:
    flat = " ".join(text.replace("│", " ").split())
    # symbols, not the panels' box-drawing lines (U+2500-U+257F)
    emoji = sum(unicodedata.category(ch) == "So" and not 0x2500 <= ord(ch) <= 0x257F for ch in text)
    cut = sum(1 for p in params if p.help and " ".join(p.help.split()) not in flat)
    names = len(re.findall(r"<[a-z]+[\[>]", text))
    long = sum(len(line) > width for line in text.splitlines())
    return emoji, cut, names, long


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 repeats instead of 10")
    ap.add_argument("--repeat", type=int, default=None)
    args = ap.parse_args()
    repeat = args.repeat or (3 if args.quick else 10)
    group: Any = get_command(app)
    cmds = sorted(group.commands)
    print(f"{len(cmds)} commands, median of {repeat} renders each")
    print(
        f"{'width':>5} {'renderer':>8} {'ms/help':>8} {'ratio':>6} {'emoji':>6} {'cut':>4} "
        f"{'typenames':>9} {'long':>5}"
    )
    for width in (80, 120):
        rows: dict[str, tuple[float, list[int]]] = {}
        for name, rich in (("plain", False), ("rich", True)):
            times, totals = [], [0, 0, 0, 0]
            for cmd in cmds:
                params = [p for p in group.commands[cmd].params if not getattr(p, "hidden", False)]
                for _ in range(repeat):
                    t = time.perf_counter()
                    text = render(rich, cmd, width)
                    times.append(time.perf_counter() - t)
                for i, n in enumerate(flaws(text, params, width)):
                    totals[i] += n
            rows[name] = (statistics.median(times) * 1e3, totals)
        for name, (ms, totals) in rows.items():
            ratio = ms / rows["plain"][0]
            print(
                f"{width:>5} {name:>8} {ms:8.2f} {ratio:6.2f} {totals[0]:6d} {totals[1]:4d} "
                f"{totals[2]:9d} {totals[3]:5d}"
            )
    typer.echo("(rich = typer's default help; plain = the formatter every command uses)")


if __name__ == "__main__":
    main()
