"""A setting declared once: its default, its help and how its flag is written.

A settings dataclass (bench's sections) declares each field with :func:`flag`. From
that one declaration the settings model reads the field's environment variable
(``INFERSIGHT_BENCH_`` + the field's name) and the CLI makes the typer option of every
command that takes the flag (:mod:`infersight.cli.flag_options`), so a default or a
help text is written in one place.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["API_KEY_ENV_HELP", "API_KEY_FILE_HELP", "Flag", "declared", "flag"]

#: The API key flags' help, the same wherever a key is used.
API_KEY_ENV_HELP = "Environment variable holding the API key."
API_KEY_FILE_HELP = "File holding the API key (its first line)."


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

    def option_names(self, field: str) -> tuple[str, ...]:
        """The option's names: the declared ones, else ``--field-name``."""
        return self.names or ("--" + field.replace("_", "-"),)


def flag(
    default: Any = None,
    help: str = "",
    *,
    factory: Callable[[], Any] | None = None,
    **how: Any,
) -> Any:
    """A dataclass field with its :class:`Flag`: ``url: str | None = flag(None, "...")``.

    ``factory`` makes a mutable default; ``how`` are :class:`Flag`'s other fields.
    """
    meta = {"flag": Flag(help, **how)}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def declared(cls: type) -> Iterator[tuple[dataclasses.Field[Any], Flag]]:
    """Each field of the dataclass ``cls`` with its :class:`Flag`."""
    for f in dataclasses.fields(cls):
        yield f, f.metadata["flag"]
