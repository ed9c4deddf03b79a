"""Workloads: the request bodies a level sends, built before the level starts.

Synthetic prompts are sequences of common English words, each one token in the usual
BPE vocabularies. When the target offers ``/tokenize`` the words are checked against
the target's own tokenizer and every prompt is verified to hold exactly the requested
number of tokens; otherwise lengths are approximate and the result says so. Prompt
text is random per request (seeded), so no two requests share more than a word or
two of prefix unless a shared prefix is asked for.
"""

from __future__ import annotations

import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from infersight.core.errors import ConfigError

__all__ = ["Distribution", "Prompt", "SyntheticPrompts", "build_bodies"]

Tokenize = Callable[[str], Awaitable[list[int] | None]]

_WORDS = (  # noqa: SIM905 - one readable block of words
    "the of and to in is was for on are as with his they at be this from have or by one "
    "had not but what all were when we there can an your which their said if do will each "
    "about how up out them then she many some so these would other into has more her two "
    "like him see time could no make than first been its who now people my made over did "
    "down only way find use may water long little very after words called just where most "
    "know get through back much before go good new write our used me man too any day same "
    "right look think also around another came come work three word must because does part "
    "even place well such here take why things help put years different away again off went "
    "old number great tell men say small every found still between name should home big give "
    "air line set own under read last never us left end along while might next sound below "
    "saw something thought both few those always looked show large often together asked house"
).split()


@dataclass(frozen=True, slots=True)
class Distribution:
    """A token-length distribution: ``fixed:N``, ``uniform:A:B``, ``normal:MEAN:SD`` or
    ``lognormal:MEAN:SD`` (mean and SD of the lengths). Draws are integers >= 1."""

    kind: str
    a: float
    b: float = 0.0

    @classmethod
    def parse(cls, text: str, flag: str) -> Distribution:
        parts = text.strip().lower().split(":")
        try:
            if len(parts) == 1:
                return cls._checked("fixed", float(int(parts[0])), 0.0, text, flag)
            kind, *nums = parts
            values = [float(x) for x in nums]
        except ValueError:
            raise ConfigError(_syntax(flag, text)) from None
        if kind == "fixed" and len(values) == 1:
            return cls._checked(kind, values[0], 0.0, text, flag)
        if kind in ("uniform", "normal", "lognormal") and len(values) == 2:
            return cls._checked(kind, values[0], values[1], text, flag)
        raise ConfigError(_syntax(flag, text))

    @classmethod
    def _checked(cls, kind: str, a: float, b: float, text: str, flag: str) -> Distribution:
        if a < 1 or b < 0 or (kind == "uniform" and b < a) or not math.isfinite(a + b):
            raise ConfigError(f"{flag} {text!r}: lengths must be >= 1 (and A <= B)")
        return cls(kind, a, b)

    def sample(self, n: int, rng: np.random.Generator) -> list[int]:
        if self.kind == "fixed":
            draws = np.full(n, self.a)
        elif self.kind == "uniform":
            draws = rng.integers(int(self.a), int(self.b) + 1, size=n).astype(np.float64)
        elif self.kind == "normal":
            draws = rng.normal(self.a, self.b, size=n)
        else:
            sigma2 = math.log1p((self.b / self.a) ** 2)
            draws = rng.lognormal(math.log(self.a) - sigma2 / 2, math.sqrt(sigma2), size=n)
        return [max(1, round(float(x))) for x in draws]

    def describe(self) -> str:
        if self.kind == "fixed":
            return f"fixed:{self.a:g}"
        return f"{self.kind}:{self.a:g}:{self.b:g}"


def _syntax(flag: str, text: str) -> str:
    return f"{flag} {text!r}: use fixed:N, uniform:A:B, normal:MEAN:SD or lognormal:MEAN:SD"


@dataclass(slots=True)
class Prompt:
    """One request's input: chat messages (the completions endpoint joins them)."""

    messages: list[dict[str, Any]]
    max_tokens: int
    input_tokens: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class SyntheticPrompts:
    """Random-word prompts of an exact token length when a tokenizer is available."""

    def __init__(self, tokenize: Tokenize | None, seed: int) -> None:
        self._tokenize = tokenize
        self._rng = random.Random(seed)
        self._words: list[str] = list(_WORDS)
        self.exact = False

    async def prepare(self) -> None:
        """Keep only words that are one token in the target's vocabulary."""
        if self._tokenize is None:
            return
        probe = await self._tokenize(" the")
        if probe is None:
            self._tokenize = None
            return
        single = []
        for w in _WORDS:
            toks = await self._tokenize(" " + w)
            if toks is not None and len(toks) == 1:
                single.append(w)
        if len(single) >= 20:
            self._words = single
            self.exact = True
        else:
            self._tokenize = None

    @property
    def vocabulary(self) -> tuple[str, ...]:
        """The words prompts are made of (one token each when :attr:`exact`)."""
        return tuple(self._words)

    def words(self, n: int) -> str:
        return " ".join(self._rng.choice(self._words) for _ in range(n))

    async def text(self, n_tokens: int, prefix: str = "") -> tuple[str, bool]:
        """Text of ``n_tokens`` tokens after ``prefix``; and whether the count is exact."""
        body = self.words(n_tokens)
        text = f"{prefix} {body}" if prefix else body
        if not self.exact or self._tokenize is None:
            return text, False
        want = n_tokens + (len(await self._tokenize(prefix) or []) if prefix else 0)
        for _ in range(4):
            toks = await self._tokenize(text)
            if toks is None:
                return text, False
            diff = want - len(toks)
            if diff == 0:
                return text, True
            words = text.split(" ")
            if diff > 0:
                words += [self._rng.choice(self._words) for _ in range(diff)]
            else:
                words = words[: max(1, len(words) + diff)]
            text = " ".join(words)
        return text, False


def build_bodies(
    prompts: list[Prompt],
    *,
    model: str,
    endpoint: str,
    stream: bool,
    ignore_eos: bool,
) -> list[dict[str, Any]]:
    """OpenAI request bodies for the chat or completions endpoint."""
    bodies: list[dict[str, Any]] = []
    for p in prompts:
        body: dict[str, Any] = {"model": model, "max_tokens": p.max_tokens, "stream": stream}
        if endpoint == "chat":
            body["messages"] = p.messages
        else:
            body["prompt"] = "\n".join(str(m.get("content", "")) for m in p.messages)
        if ignore_eos:
            body["ignore_eos"] = True
        body.update(p.extra)
        bodies.append(body)
    return bodies
