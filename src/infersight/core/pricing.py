"""Price table: $ per million input and output tokens, per model.

The shipped defaults live in ``infersight/data/prices.toml``; a user file in the same
format (``--prices FILE`` or ``INFERSIGHT_PRICES_FILE``) overrides and extends them.
"""

from __future__ import annotations

import fnmatch
import os
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from infersight.core.errors import ConfigError, read_user_file

__all__ = ["Price", "PriceTable"]


@dataclass(frozen=True, slots=True)
class Price:
    """$ per million tokens."""

    input: float
    output: float
    note: str = ""

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input + completion_tokens * self.output) / 1e6


class PriceTable:
    """Looks up a model's price: exact name, then case-insensitive, then patterns."""

    def __init__(self, prices: dict[str, Price]) -> None:
        self._prices = dict(prices)
        self._lower = {k.lower(): v for k, v in prices.items()}

    @classmethod
    def load(cls, path: str | Path | None = None, *, defaults: bool = True) -> PriceTable:
        """Shipped defaults, overridden by ``path`` or ``$INFERSIGHT_PRICES_FILE``."""
        prices: dict[str, Price] = {}
        if defaults:
            text = resources.files("infersight.data").joinpath("prices.toml").read_text()
            prices.update(_parse(text, "shipped prices.toml"))
        user = path or os.environ.get("INFERSIGHT_PRICES_FILE")
        if user:
            p = Path(user)
            mine = _parse(read_user_file(p, "price table").decode(), str(p))
            # User entries go first (their patterns win) and their values override.
            prices = {**mine, **prices, **mine}
        return cls(prices)

    @classmethod
    def flat(cls, input_per_mtok: float, output_per_mtok: float) -> PriceTable:
        """One price for every model (``--price-in`` / ``--price-out``)."""
        return cls({"*": Price(input_per_mtok, output_per_mtok, "flat price from flags")})

    def price(self, model: str | None) -> Price | None:
        if model is None:
            return self._prices.get("*")
        if model in self._prices:
            return self._prices[model]
        if model.lower() in self._lower:
            return self._lower[model.lower()]
        for pattern, price in self._prices.items():
            if fnmatch.fnmatch(model.lower(), pattern.lower()):
                return price
        return None

    def cost(self, model: str | None, prompt_tokens: int, completion_tokens: int) -> float | None:
        """Dollars for one request, or None when the model has no price."""
        p = self.price(model)
        return None if p is None else p.cost(prompt_tokens, completion_tokens)

    def models(self) -> dict[str, Price]:
        return dict(self._prices)


def _parse(text: str, where: str) -> dict[str, Price]:
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"price table {where}: invalid TOML ({e})") from None
    out: dict[str, Price] = {}
    for name, entry in (doc.get("models") or {}).items():
        try:
            inp, outp = float(entry["input"]), float(entry["output"])
        except (KeyError, TypeError, ValueError):
            raise ConfigError(
                f"price table {where}: model {name!r} needs numeric 'input' and 'output'"
            ) from None
        if inp < 0 or outp < 0:
            raise ConfigError(f"price table {where}: model {name!r} has a negative price")
        out[name] = Price(inp, outp, str(entry.get("note", "")))
    return out
