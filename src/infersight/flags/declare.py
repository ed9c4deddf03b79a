"""A setting declared once: its default, its constraints, its help and its flag.

A settings dataclass (bench's sections, tune's configuration) declares each field with
:func:`flag`. From that one declaration :func:`settings_model` makes the flat pydantic
model that validates the values and reads each field's environment variable (the
model's prefix + the field's name), and the CLI makes the typer option of every command
that takes the flag (``infersight.cli.flag_options``): a default or a help text is
written in one place.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, Field, ValidationInfo, create_model, field_validator

from infersight.core.errors import ConfigError

__all__ = [
    "API_KEY_ENV_HELP",
    "API_KEY_FILE_HELP",
    "URL_HELP",
    "Flag",
    "declared",
    "flag",
    "flag_names",
    "parse_levels",
    "settings_model",
]

M = TypeVar("M", bound=BaseModel)

#: The API key flags' help, the same wherever a key is used.
API_KEY_ENV_HELP = "Environment variable holding the API key."
API_KEY_FILE_HELP = "File holding the API key (its first line)."
#: The target's URL flag's help, the same in every command that sends requests.
URL_HELP = "The server's root URL, e.g. http://127.0.0.1:8000."


@dataclass(frozen=True, slots=True)
class Flag:
    """How a setting appears on the command line (the field's metadata)."""

    #: The help text of its option (and the field's documentation).
    help: str
    #: The value's name in help (``URL``, ``LIST``...); None: one from its type.
    metavar: str | None = None
    #: What help shows as the default when it is not the default's own value
    #: (``"start the embedded engine"``); None: the default's value.
    show_default: str | None = None
    #: The option's names when not ``--field-name`` (``("--parallel",)``).
    names: tuple[str, ...] = ()
    #: A time: ``500ms``, ``2s``, ``1m`` or bare seconds on the command line.
    duration: bool = False
    #: A comma list on the command line (``1,4,16``) of this kind of number.
    items: type[int] | type[float] | None = None
    #: False: a setting with no flag of its own (set by other flags, or only from the
    #: environment and the library).
    cli: bool = True
    #: A positional argument rather than an option.
    argument: bool = False

    def option_names(self, field: str) -> tuple[str, ...]:
        """The option's names: the declared ones, else ``--field-name``."""
        return self.names or ("--" + field.replace("_", "-"),)


def flag(
    default: Any = ...,
    help: str = "",
    *,
    factory: Callable[[], Any] | None = None,
    **how: Any,
) -> Any:
    """A dataclass field with its :class:`Flag`: ``url: str | None = flag(None, "...")``.

    No ``default``: required; ``factory`` makes a mutable default; ``how`` are
    :class:`Flag`'s other fields.
    """
    meta = {"flag": Flag(help, **how)}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    if default is ...:
        return dataclasses.field(metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def declared(cls: type) -> Iterator[tuple[dataclasses.Field[Any], Flag]]:
    """Each field of the dataclass ``cls`` with its :class:`Flag`."""
    for f in dataclasses.fields(cls):
        yield f, f.metadata["flag"]


def flag_names(*classes: type) -> dict[str, str]:
    """Each field's flag, by field name (``engine_parallel``: ``--parallel``)."""
    return {f.name: how.option_names(f.name)[0] for cls in classes for f, how in declared(cls)}


def parse_levels(text: str, kind: type[int] | type[float], flag: str) -> list[Any]:
    """``"1,2,4"`` -> ``[1, 2, 4]``; one clear error otherwise."""
    try:
        values = [kind(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise ConfigError(f"{flag} {text!r}: expected a comma-separated list of numbers") from None
    if not values:
        raise ConfigError(f"{flag}: give at least one value")
    return values


def settings_model(name: str, base: type[M], *sections: type) -> type[M]:
    """The flat settings model of the declared dataclasses ``sections``: ``base`` (its
    environment prefix, its per-field validators) with every field, its type, constraints
    and default. A comma list field also takes the command line's ``"1,4,16"``."""
    definitions: dict[str, Any] = {}
    lists: dict[str, tuple[type[int] | type[float], str]] = {}
    for cls in sections:
        hints = typing.get_type_hints(cls, include_extras=True)
        for f, how in declared(cls):
            default: Any = ... if f.default is dataclasses.MISSING else f.default
            if callable(f.default_factory):
                default = Field(default_factory=f.default_factory, description=how.help)
            definitions[f.name] = (hints[f.name], default)
            if how.items is not None:
                lists[f.name] = (how.items, how.option_names(f.name)[0])

    def comma_list(v: Any, info: ValidationInfo) -> Any:
        kind, flag_name = lists[str(info.field_name)]
        return parse_levels(v, kind, flag_name) if isinstance(v, str) else v

    validators: dict[str, Any] = {}
    if lists:
        validators["comma_list"] = field_validator(*lists, mode="before")(comma_list)
    model: type[M] = create_model(name, __base__=base, __validators__=validators, **definitions)
    return model
