"""Think time: how long a user pauses between an answer and their next message."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from infersight.core.durations import parse_duration
from infersight.core.errors import ConfigError

__all__ = ["ThinkTime"]


@dataclass(frozen=True, slots=True)
class ThinkTime:
    """A think-time distribution in seconds: fixed, uniform or exponential."""

    kind: str
    a: float
    b: float = 0.0

    @classmethod
    def parse(cls, text: str) -> ThinkTime:
        flag = "--think-time"
        parts = text.strip().lower().split(":")
        try:
            if len(parts) == 1:
                return cls("fixed", parse_duration(parts[0], flag))
            kind, *vals = parts
            secs = [parse_duration(v, flag) for v in vals]
        except ConfigError:
            raise ConfigError(_think_syntax(text)) from None
        if kind == "fixed" and len(secs) == 1:
            return cls("fixed", secs[0])
        if kind == "uniform" and len(secs) == 2 and secs[0] <= secs[1]:
            return cls("uniform", secs[0], secs[1])
        if kind in ("exponential", "exp") and len(secs) == 1:
            return cls("exponential", secs[0])
        raise ConfigError(_think_syntax(text))

    def sample(self, rng: np.random.Generator) -> float:
        if self.kind == "uniform":
            return float(rng.uniform(self.a, self.b))
        if self.kind == "exponential":
            return float(rng.exponential(self.a)) if self.a > 0 else 0.0
        return self.a


def _think_syntax(text: str) -> str:
    return (
        f"--think-time {text!r}: use a duration (2s), uniform:A:B or exponential:MEAN, "
        "e.g. uniform:1s:5s"
    )
