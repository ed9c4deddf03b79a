"""Typer options made from the settings' declarations, so each flag is written once.

A setting is declared once, with its default and help (:func:`infersight.flags.declare.flag`,
in bench's sections); :func:`declared_options` makes its option for every command that
takes it. Each such option defaults to None: a flag not given leaves the setting to its
``INFERSIGHT_*`` variable, else to its declared default, which help shows. A command
is a function of ``**flags`` whose signature :func:`command` sets from the parameters.
"""

from __future__ import annotations

import dataclasses
import inspect
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, TypeVar

import typer

from infersight.cli._conventions import duration_option
from infersight.core.durations import format_duration
from infersight.flags.declare import Flag, declared

__all__ = ["command", "declared_options", "parameter"]

F = TypeVar("F", bound=Callable[..., Any])


def parameter(name: str, annotation: Any, option: Any) -> inspect.Parameter:
    """One option of a command: its keyword, its value's type and its typer option."""
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation
    )


def command(parameters: Iterable[inspect.Parameter]) -> Callable[[F], F]:
    """Give a ``**flags`` function these parameters (typer reads ``__signature__``)."""

    def apply(fn: F) -> F:
        fn.__signature__ = inspect.Signature(list(parameters))  # type: ignore[attr-defined]
        return fn

    return apply


def declared_options(
    section: type,
    *,
    panel: str | None = None,
    only: Sequence[str] | None = None,
    show_default: Mapping[str, str | bool] | None = None,
    after: Mapping[str, Sequence[inspect.Parameter]] | None = None,
) -> list[inspect.Parameter]:
    """The options of the settings dataclass ``section``'s fields that have a flag.

    ``only``: these fields alone; ``show_default``: what help shows as the default
    where this command's differs (False: none); ``after``: a command's own options,
    placed after a field's; ``panel``: the help section they are listed under.
    """
    hints = typing.get_type_hints(section, include_extras=True)
    shown = show_default or {}
    out: list[inspect.Parameter] = []
    for f, how in declared(section):
        if not how.cli or (only is not None and f.name not in only):
            continue
        default = f.default_factory() if callable(f.default_factory) else f.default
        default = ... if default is dataclasses.MISSING else default
        value_type, option = _option(f.name, how, hints[f.name], default, panel, shown)
        out.append(parameter(f.name, value_type, option))
        out.extend((after or {}).get(f.name, ()))
    return out


def _option(
    name: str,
    how: Flag,
    hint: Any,
    default: Any,
    panel: str | None,
    shown: Mapping[str, str | bool],
) -> tuple[Any, Any]:
    """The value type on the command line and the typer option of one field (a required
    one takes its value; the others None, the declared default applying later)."""
    names = how.option_names(name)
    show: str | bool = shown.get(name, how.show_default or _shown(default, how))
    value_type, choices = _value_type(hint, how)
    given: Any = ... if default is ... else None
    if how.argument:
        return value_type, typer.Argument(given, metavar=how.metavar, help=how.help)
    if how.duration:
        return value_type, duration_option(
            given, *names, help=how.help, show_default=show, panel=panel
        )
    if value_type is bool and len(names) == 1:
        flag = names[0]
        names = (f"{flag}/--no-{flag[2:]}",) if default is True else names
        show = flag[2:] if default is True else False
    return value_type, typer.Option(
        given,
        *names,
        metavar=None if value_type is bool else how.metavar or choices,
        help=how.help,
        show_default=show,
        rich_help_panel=panel,
    )


def _shown(default: Any, how: Flag) -> str | bool:
    if default is None or default is False or default is ... or default in ((), {}):
        return False
    return format_duration(default) if how.duration else str(default)


def _value_type(hint: Any, how: Flag) -> tuple[Any, str | None]:
    """The option's value type (a comma list is one string) and, for a choice, its
    metavar (``chat|completions``)."""
    if typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
        if typing.get_origin(hint) is typing.Annotated:
            hint = typing.get_args(hint)[0]
    origin = typing.get_origin(hint)
    if origin is Literal:
        return str, "|".join(str(a) for a in typing.get_args(hint))
    if origin is tuple:
        return (str if how.items else list[str]), None
    if origin is not None:  # a mapping, written in its own syntax (--slo)
        return str, None
    return hint, None
