"""Prompt text for trace replay, rebuilt so that shared prefixes are shared again.

Text is made of words that are each one token in the target's vocabulary (checked
with its ``/tokenize`` by :class:`~infersight.bench.workload.SyntheticPrompts`), so a
text of n words is n tokens. Every piece of text comes from a key: the same key gives
the same words, a new key new words.

- Mooncake ``hash_ids``: block ``i`` of a prompt is the first tokens of the block keyed
  by its id; a request that shares ids with an earlier one shares those blocks of text,
  in the same order, so a prefix cache sees what it saw in production. Tokens beyond
  the listed blocks are the request's own.
- Access-log ``prefix`` entries (a chained hash and a length per message): a message's
  text is keyed by its chained hash, so requests that sent the same first k messages
  (a system prompt, a conversation's history) send the same first k texts. A message
  keeps the token count it first got, so its text is identical wherever it recurs.
- Lines without either (BurstGPT, plain CSV): every prompt is its own.

Blocks are cached (least recently used first out), so building a prompt mostly joins
strings that exist already.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from infersight.bench.replay.formats import TraceEntry

__all__ = ["TextBuilder", "allot"]

#: Mooncake's block size: a hash id stands for this many tokens.
DEFAULT_BLOCK_TOKENS = 512
#: Words per generated chunk of a message's text.
_CHUNK = 512
#: Cached chunks (each about 3 KB of text).
_CACHE_CHUNKS = 4096
#: Messages whose token count is remembered.
_MEMO = 50_000


def allot(total: int, weights: Sequence[int]) -> list[int]:
    """``total`` tokens split in proportion to ``weights`` (largest remainders first),
    at least one for every non-zero weight when there are enough."""
    n = len(weights)
    wsum = sum(weights)
    if n == 0:
        return []
    if wsum <= 0:
        return [total // n + (1 if i < total % n else 0) for i in range(n)]
    raw = [total * w / wsum for w in weights]
    out = [int(x) for x in raw]
    for i in sorted(range(n), key=lambda i: raw[i] - out[i], reverse=True)[: total - sum(out)]:
        out[i] += 1
    for i in range(n):  # a message with text keeps at least one token when others can give
        if weights[i] > 0 and out[i] == 0:
            j = max(range(n), key=lambda k: out[k])
            if out[j] > 1:
                out[j] -= 1
                out[i] = 1
    return out


class TextBuilder:
    """Deterministic text from keys; see the module docstring."""

    def __init__(
        self, words: Sequence[str], seed: int, block_tokens: int = DEFAULT_BLOCK_TOKENS
    ) -> None:
        self._words = np.asarray(list(words), dtype=object)
        self._lens = np.fromiter(
            (len(w) + 1 for w in self._words), dtype=np.int64, count=len(self._words)
        )
        self._seed = int(seed) & 0xFFFFFFFF
        self.block_tokens = block_tokens
        self._chunks: OrderedDict[tuple[int, int], tuple[str, np.ndarray]] = OrderedDict()
        self._memo: OrderedDict[str, int] = OrderedDict()

    # -- text from keys -------------------------------------------------------------
    def _chunk(self, key: int, index: int, keep: bool) -> tuple[str, np.ndarray]:
        """Chunk ``index`` of the words keyed by ``key``: its text and the end of each
        word in it (characters); cached when ``keep``."""
        k = (key, index)
        hit = self._chunks.get(k)
        if hit is not None:
            self._chunks.move_to_end(k)
            return hit
        idx = _word_indices(self._seed, key, index, len(self._words))
        ends = np.cumsum(self._lens[idx]) - 1  # each word and its space, less the last
        out = (" ".join(self._words[idx]), ends)
        if keep:
            self._chunks[k] = out
            if len(self._chunks) > _CACHE_CHUNKS:
                self._chunks.popitem(last=False)
        return out

    def words(self, key: int, n: int, *, shared: bool = True) -> str:
        """The first ``n`` words keyed by ``key`` (n tokens); a request's own text
        (``shared=False``) is not kept for reuse."""
        parts = []
        index = 0
        while n > 0:
            text, ends = self._chunk(key, index, shared)
            take = min(n, _CHUNK)
            parts.append(text if take == _CHUNK else text[: int(ends[take - 1])])
            n -= take
            index += 1
        return " ".join(parts)

    # -- prompts --------------------------------------------------------------------
    def mooncake(self, e: TraceEntry, own_key: int) -> str:
        """The prompt of a Mooncake line: its blocks' text, then its own tokens."""
        if e.text is not None:
            return e.text
        left = e.input_tokens
        parts = []
        for h in e.hash_ids:
            if left <= 0:
                break
            take = min(left, self.block_tokens)
            parts.append(self.words(_block_key(h, self.block_tokens), take))
            left -= take
        if left > 0:
            parts.append(self.words(own_key, left, shared=False))
        return " ".join(parts)

    def counts(self, e: TraceEntry, content_tokens: int) -> list[int]:
        """Tokens of each message of an access-log line: ``content_tokens`` split by the
        messages' lengths; a message seen before keeps the count it got then (so its
        text is the same). Every worker calls this for every line, in order."""
        prefix = e.prefix or (("user", "", 1),)
        known = [self._memo.get(h) if h else None for _, h, _ in prefix]
        fixed = sum(k for k in known if k is not None)
        free = [i for i, k in enumerate(known) if k is None]
        shares = allot(max(0, content_tokens - fixed), [prefix[i][2] for i in free])
        out = [0 if k is None else k for k in known]
        for i, n in zip(free, shares, strict=True):
            out[i] = n
            h = prefix[i][1]
            if h:
                self._memo[h] = n
                if len(self._memo) > _MEMO:
                    self._memo.popitem(last=False)
        return out

    def messages(self, e: TraceEntry, counts: list[int], own_key: int) -> list[dict[str, Any]]:
        """Chat messages for an access-log line with the token counts of :meth:`counts`."""
        prefix = e.prefix or (("user", "", 1),)
        return [
            {
                "role": _role(role),
                "content": self.words(int(h, 16) if h else own_key, max(1, n), shared=bool(h)),
            }
            for (role, h, _), n in zip(prefix, counts, strict=True)
        ]


_STEPS = np.arange(_CHUNK, dtype=np.uint64)
_MASK = 0xFFFFFFFFFFFFFFFF


def _word_indices(seed: int, key: int, index: int, n_words: int) -> np.ndarray:
    """``_CHUNK`` word indices, a pure function of (seed, key, index): SplitMix64 over
    a counter (one vectorised pass; a seeded generator per chunk costs 4x more)."""
    base = (
        seed * 0x9E3779B97F4A7C15 + (key & _MASK) * 0xD1B54A32D192ED03 + index * 0x8CB92BA72F3D8DD7
    ) & _MASK
    with np.errstate(over="ignore"):
        x = np.uint64(base) + _STEPS * np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        x ^= x >> np.uint64(31)
    return (x % np.uint64(n_words)).astype(np.intp)


def _block_key(h: int, block_tokens: int) -> int:
    # Different block sizes must not share text for one id.
    return (h << 12) ^ block_tokens


def _role(role: str) -> str:
    return role if role in ("system", "user", "assistant", "developer") else "user"
