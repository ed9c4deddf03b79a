"""Click's help layout with one change: words are never split.

Click wraps with :mod:`textwrap`'s defaults, which break a long token anywhere and a
hyphenated one at its hyphens, so ``--output-tokens`` could print as ``--output-`` /
``tokens`` and a syntax like ``NAME=URL[,models=a|b]`` be cut mid-word. Here a line
breaks only at spaces; a token wider than the column stays whole (the help test then
flags the overlong line, so the text gets reworded instead).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

from typer.core import TyperCommand, TyperGroup

__all__ = ["Context", "Group", "wrap"]

_ClickContext: Any = TyperCommand.context_class
_ClickFormatter: Any = _ClickContext.formatter_class


def _paragraphs(text: str) -> list[tuple[int, bool, str]]:
    """(indent, keep as written, text) per paragraph; ``\\b`` on its own line keeps one."""
    out: list[tuple[int, bool, str]] = []
    for block in textwrap.dedent(text.expandtabs()).split("\n\n"):
        lines = [ln for ln in block.split("\n") if ln.strip()]
        if not lines:
            continue
        if lines[0].strip() == "\b":
            out.append((0, True, "\n".join(lines[1:])))
            continue
        indent = len(lines[0]) - len(lines[0].lstrip())
        out.append((indent, False, " ".join(ln.strip() for ln in lines)))
    return out


def wrap(text: str, width: int, indent: str = "") -> str:
    """``text`` wrapped to ``width`` at spaces only, paragraphs kept, ``\\b`` blocks as written."""
    out = []
    for extra, raw, para in _paragraphs(text):
        pad = indent + " " * extra
        if raw:
            out.append("\n".join(pad + ln for ln in para.split("\n")))
            continue
        wrapper = textwrap.TextWrapper(
            max(width, 10),
            initial_indent=pad,
            subsequent_indent=pad,
            break_long_words=False,
            break_on_hyphens=False,
        )
        out.append(wrapper.fill(para))
    return "\n\n".join(out)


class HelpFormatter(_ClickFormatter):  # type: ignore[misc]
    """Click's formatter, wrapping with :func:`wrap`."""

    def write_text(self, text: str) -> None:
        self.write(wrap(text, self.width, " " * self.current_indent) + "\n")

    def write_dl(
        self, rows: Sequence[tuple[str, str]], col_max: int = 30, col_spacing: int = 2
    ) -> None:
        rows = list(rows)
        first_col = min(max((len(a) for a, _ in rows), default=0), col_max) + col_spacing
        lead = " " * self.current_indent
        for first, second in rows:
            self.write(f"{lead}{first}")
            if not second:
                self.write("\n")
                continue
            if len(first) <= first_col - col_spacing:
                self.write(" " * (first_col - len(first)))
            else:
                self.write("\n" + " " * (first_col + self.current_indent))
            lines = wrap(second, max(self.width - first_col - 2, 10)).splitlines() or [""]
            self.write(lines[0] + "\n")
            for line in lines[1:]:
                self.write(" " * (first_col + self.current_indent) + line + "\n")


class Context(_ClickContext):  # type: ignore[misc]
    """The context of every command: help through :class:`HelpFormatter`."""

    formatter_class = HelpFormatter


class Group(TyperGroup):
    """The root command (``infersight --help``), laid out the same way."""

    context_class = Context
