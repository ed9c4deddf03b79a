"""Counted words in the sentences outputs print: "1 change", "3 changes"."""

from __future__ import annotations

__all__ = ["counted"]


def counted(n: int, word: str, plural: str | None = None) -> str:
    """``n`` and ``word``, plural unless ``n`` is 1: ``counted(3, "change")`` is
    ``3 changes``; ``plural`` for a word that does not just take an s."""
    return f"{n:,} {word}" if n == 1 else f"{n:,} {plural or word + 's'}"
