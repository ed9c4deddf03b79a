"""The conventions every command's help and flags follow.

``tests/unit/cli/test_cli_help.py`` renders every command's ``--help`` at 80 and 120
columns and checks it against these rules, so a new flag is held to them as soon as it
is added:

- Help is plain text (click's formatter; no rich markup or emoji, so ``uniform:A:B``
  and ``[x]`` print as written), wrapped to the terminal up to 120 columns.
- Every option has help text, and every value shows a metavar naming it (``N``,
  ``NUMBER``, ``TEXT``, ``PATH``, ``URL``, ``DURATION``...), never a Python type:
  :class:`Command` fills in the ones a flag does not name.
- Defaults appear one way, as ``[default: X]``. When the effective default comes from
  settings (the option's own default is None), pass ``show_default="X"``; never write
  "(default: X)" or "[X]" in the help text.
- Times go through :func:`duration_option`: ``500ms``, ``2s``, ``1m`` or bare seconds.
- API keys: :func:`api_key_env_option` and :func:`api_key_file_option`, always both.
- A file a command writes is ``-o/--out`` (:func:`out_option`); a port it serves is
  ``-p/--port`` (:func:`port_option`).
- Each command's help is built by :func:`command_help` and ends with one Examples
  block, each example a line that fits in 80 columns.
- A flag name means one thing in every command: :data:`VOCABULARY`.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperArgument, TyperCommand

from infersight.cli._help_format import Context
from infersight.core.durations import format_duration, parse_duration
from infersight.flags.declare import API_KEY_ENV_HELP, API_KEY_FILE_HELP

# report.llmd.writer is imported in llmd_version: at the top it adds ~0.15 s to `infersight --help`.

__all__ = [
    "MAX_WIDTH",
    "VOCABULARY",
    "Command",
    "api_key_env_option",
    "api_key_file_option",
    "apply_conventions",
    "command_help",
    "duration_option",
    "format_option",
    "llmd_version",
    "out_option",
    "port_option",
]

#: Help is wrapped to the terminal's width, up to this many columns.
MAX_WIDTH = 120

#: Flag -> words its help must contain in every command that has it: one meaning each.
VOCABULARY = {
    "--concurrency": "requests kept in flight",
    "--max-concurrency": "at most this many requests in flight",
    "--api-key-env": "environment variable",
    "--api-key-file": "file",
    "--config": "config file",
    "--url": "root url",
    "--parallel": "slots",
}

#: The only short options, each meaning one long option in every command.
SHORT_OPTIONS = {
    "-c": "--config",
    "-o": "--out",
    "-u": "--upstream",
    "-p": "--port",
    "-m": "--markdown",
    "-l": "--label",
    "-q": "--quiet",
    "-v": "--verbose",
    "-h": "--help",
}

#: Click shows a ``show_default="X"`` text as ``[default: (X)]``; one style: ``[default: X]``.
_DEFAULT_IN_PARENS = re.compile(r"default: \(([^()]*(?:\([^()]*\)[^()]*)*)\)")

_BY_ANNOTATION: dict[object, str] = {int: "N", float: "NUMBER", str: "TEXT", bool: "BOOL"}
_BY_TYPE_NAME = {
    "integer": "N",
    "float": "NUMBER",
    "text": "TEXT",
    "path": "PATH",
    "boolean": "BOOL",
}


def derived_metavar(param: Any) -> str:
    """A metavar for a parameter that names none, from its type (``N``, ``PATH``...)."""
    desc = getattr(param, "type_descriptor", None)  # typer >= 0.20
    if desc is not None:
        if getattr(desc, "is_path", False):
            return "PATH"
        ann = desc.annotation
        if getattr(desc, "is_list", False):
            ann = typing.get_args(ann)[0] if typing.get_args(ann) else str
        if isinstance(ann, type) and issubclass(ann, Path):
            return "PATH"
        return _BY_ANNOTATION.get(ann, "VALUE")
    name = getattr(getattr(param, "type", None), "name", "")  # click-based typer
    return _BY_TYPE_NAME.get(str(name), "VALUE")


class Command(TyperCommand):
    """A command whose every value shows a metavar, and whose arguments are listed by
    metavar alone (typer would show ``input <path>`` and a ``{input}`` usage)."""

    context_class = Context

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for p in self.params:
            if isinstance(p, TyperArgument):
                if p.metavar is None:
                    p.metavar = (p.name or "value").upper()
            elif not getattr(p, "is_flag", False) and p.metavar is None:
                p.metavar = derived_metavar(p)

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for p in self.get_params(ctx):
            if isinstance(p, TyperArgument):
                name = str(p.metavar) + ("..." if p.nargs != 1 else "")
                pieces.append(name if p.required else f"[{name}]")
        return pieces

    def format_options(self, ctx: Any, formatter: Any) -> None:
        args = [
            (str(p.metavar), (p.help or "") + (" [required]" if p.required else ""))
            for p in self.get_params(ctx)
            if isinstance(p, TyperArgument)
        ]
        # options listed by their help panel ("Load options"), in order of appearance
        panels: dict[str, list[tuple[str, str]]] = {}
        for p in self.get_params(ctx):
            if not isinstance(p, TyperArgument) and (rv := p.get_help_record(ctx)):
                title = f"{panel} options" if (panel := getattr(p, "rich_help_panel", None)) else ""
                row = (rv[0], _DEFAULT_IN_PARENS.sub(r"default: \1", rv[1]))
                panels.setdefault(title or "Options", []).append(row)
        if args:
            with formatter.section("Arguments"):
                formatter.write_dl(args)
        for title, opts in panels.items():
            with formatter.section(title):
                formatter.write_dl(opts)


def apply_conventions(app: typer.Typer) -> None:
    """Make every registered command a :class:`Command` (call after registering them)."""
    for info in app.registered_commands:
        if info.cls is None or info.cls is TyperCommand:
            info.cls = Command


def command_help(summary: str, *paragraphs: str, examples: Sequence[str]) -> str:
    """A command's help: a one-line summary, paragraphs, then the Examples block.

    Paragraphs are rewrapped to the terminal; the examples are printed as written
    (each must fit in 76 columns, a ``# comment`` line may precede one).
    """
    block = "\b\n" + "\n".join(f"  {e}" for e in examples)
    return "\n\n".join([summary, *paragraphs, "Examples:", block])


def duration_option(
    default: float | None,
    *names: str,
    help: str,
    show_default: str | bool | None = None,
    panel: str | None = None,
) -> Any:
    """A time flag: ``500ms``, ``2s``, ``1.5m``, ``1h`` or bare seconds, as seconds."""
    flag = next((n for n in names if n.startswith("--")), names[0] if names else "duration")

    def parse(value: Any) -> float:
        return parse_duration(value, flag)

    if show_default is None:
        show_default = format_duration(default) if default is not None else False
    return typer.Option(
        default,
        *names,
        metavar="DURATION",
        parser=parse,
        help=help,
        show_default=show_default,
        rich_help_panel=panel,
    )


def out_option(default: Any, *aliases: str, help: str) -> Any:
    """``-o/--out PATH``: where a command writes its file (or folder). ``aliases`` are
    older long names kept working (``monitor --record``)."""
    shown = default not in (None, ...)
    return typer.Option(
        default, "--out", "-o", *aliases, metavar="FILE", help=help, show_default=shown
    )


#: What ``--format`` accepts: infersight's own files, or those plus llm-d-benchmark's
#: benchmark report (0.2.1, or the 0.1 line with ``llm-d:0.1``).
FORMATS = ("infersight", "llm-d", "llm-d:0.1")


def llmd_version(value: str) -> str | None:
    """The benchmark report version a ``--format`` value asks for; None for infersight's
    files alone."""
    from infersight.report.llmd.writer import LLMD_VERSION

    if value == "llm-d":
        return LLMD_VERSION
    return value.removeprefix("llm-d:") if value.startswith("llm-d:") else None


def format_option(help: str, panel: str | None = None) -> Any:
    """``--format infersight|llm-d|llm-d:0.1``: llm-d also writes llm-d-benchmark's
    benchmark report, one per level (report.llmd): 0.2.1, or the 0.1 line."""

    def parse(value: str) -> str:
        if value not in FORMATS:
            raise typer.BadParameter(f"{value!r}: use {', '.join(FORMATS[:-1])} or {FORMATS[-1]}")
        return value

    return typer.Option(
        "infersight",
        "--format",
        metavar="|".join(FORMATS),
        parser=parse,
        help=help,
        rich_help_panel=panel,
    )


def port_option(default: int | None, *, help: str, show_default: str | bool | None = None) -> Any:
    """``-p/--port N``: the port a command serves on."""
    return typer.Option(
        default,
        "--port",
        "-p",
        metavar="N",
        help=help,
        show_default=default is not None if show_default is None else show_default,
    )


def api_key_env_option(help: str = API_KEY_ENV_HELP) -> Any:
    """``--api-key-env VAR``; offered with :func:`api_key_file_option` wherever a key is used."""
    return typer.Option(None, "--api-key-env", metavar="VAR", help=help)


def api_key_file_option(help: str = API_KEY_FILE_HELP) -> Any:
    """``--api-key-file FILE``; offered with :func:`api_key_env_option`."""
    return typer.Option(None, "--api-key-file", metavar="FILE", help=help)
