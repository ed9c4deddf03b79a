"""Prompt sources: synthetic lengths, shared prefix, OpenAI-messages JSONL, ShareGPT.

:class:`PromptSource` hands out the prompts a run uses, level after level, and
describes the workload for ``RunResult.config["workload"]`` (including whether token
lengths are exact in the target's tokenizer or approximate).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from infersight.bench.workload import Distribution, Prompt, SyntheticPrompts, Tokenize
from infersight.core.errors import ConfigError, file_error

__all__ = ["PromptSource", "load_dataset"]


class PromptSource:
    """Hands out fresh prompts level after level (unique across the run when it can).

    Synthetic prompts are verified against ``/tokenize`` one by one up to
    ``VERIFY_ALL`` per batch; beyond that a sample is verified, since the words are
    checked single tokens and the sample shows the count holds.
    """

    VERIFY_ALL = 2000

    def __init__(
        self,
        *,
        input_tokens: str,
        output_tokens: str | None,
        max_tokens: int,
        dataset: str | None,
        shared_prefix: int,
        seed: int,
        tokenize: Tokenize | None,
    ) -> None:
        self._rng = np.random.default_rng(seed)
        self._out = Distribution.parse(output_tokens, "--output-tokens") if output_tokens else None
        self._in = None if dataset else Distribution.parse(input_tokens, "--input-tokens")
        self._max_tokens = max_tokens
        self._shared_prefix = shared_prefix
        self._items = load_dataset(dataset) if dataset else None
        self._order = self._rng.permutation(len(self._items)) if self._items else None
        self._next = 0
        self._gen = SyntheticPrompts(tokenize, seed)
        self._prefix = ""
        self._exact = True
        self.desc: dict[str, Any] = {
            "output_tokens": self._out.describe() if self._out else f"max_tokens={max_tokens}",
            "seed": seed,
        }
        if dataset and self._items is not None:
            self.desc.update(source=str(dataset), items=len(self._items))
            self.desc["input_tokens"] = "from dataset"

    async def prepare(self) -> None:
        if self._items is not None:
            return
        await self._gen.prepare()
        if self._shared_prefix:
            self._prefix, exact = await self._gen.text(self._shared_prefix)
            self._exact = exact
        self._exact = self._exact and self._gen.exact
        self._describe()

    def _describe(self) -> None:
        assert self._in is not None
        self.desc.update(
            source="synthetic",
            input_tokens=self._in.describe(),
            shared_prefix_tokens=self._shared_prefix,
            lengths_exact=self._exact,
            lengths_note=(
                "exact in the target's tokenizer (via /tokenize), message content only; "
                "the chat template adds a fixed overhead"
                if self._exact
                else "the target offers no /tokenize (or a prompt could not be matched), "
                "so lengths count words that are usually one token each"
            ),
        )

    async def take(self, n: int) -> list[Prompt]:
        """The next ``n`` prompts."""
        out_lens = self._out.sample(n, self._rng) if self._out else [self._max_tokens] * n
        if self._items is not None:
            assert self._order is not None
            prompts = []
            for i in range(n):
                msgs, answer = self._items[int(self._order[self._next % len(self._items)])]
                self._next += 1
                mt = out_lens[i] if self._out or answer is None else min(answer, self._max_tokens)
                prompts.append(Prompt(messages=msgs, max_tokens=mt))
            if self._next > len(self._items):
                self.desc["note"] = (
                    f"the dataset has {len(self._items)} items for {self._next} requests: "
                    "prompts repeat, so a prefix cache may shorten TTFT"
                )
            return prompts
        assert self._in is not None
        in_lens = self._in.sample(n, self._rng)
        prompts = []
        step = 1 if n <= self.VERIFY_ALL else max(1, n // 200)
        for i in range(n):
            if i % step == 0:
                text, exact = await self._gen.text(in_lens[i], self._prefix)
                self._exact = self._exact and exact
            else:
                body = self._gen.words(in_lens[i])
                text = f"{self._prefix} {body}" if self._prefix else body
            prompts.append(
                Prompt(
                    messages=[{"role": "user", "content": text}],
                    max_tokens=out_lens[i],
                    input_tokens=in_lens[i] + self._shared_prefix,
                )
            )
        self._describe()
        return prompts


def load_dataset(path: str) -> list[tuple[list[dict[str, Any]], int | None]]:
    """Items as (messages, reference answer length in ~tokens or None).

    ``.jsonl``: one OpenAI request per line (``{"messages": [...]}``, optionally with
    ``max_tokens``) or a bare list of messages. ``.json``: ShareGPT format, a list of
    ``{"conversations": [{"from": "human", "value": ...}, {"from": "gpt", ...}]}``; the
    first human turn is the prompt and the reply's length (chars / 4) the output length.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise file_error(p, e, "--dataset") from None
    items = _jsonl(p, text) if p.suffix == ".jsonl" else _sharegpt(p, text)
    if not items:
        raise ConfigError(f"--dataset {p}: no usable prompts found")
    return items


def _jsonl(p: Path, text: str) -> list[tuple[list[dict[str, Any]], int | None]]:
    items: list[tuple[list[dict[str, Any]], int | None]] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise ConfigError(f"--dataset {p}:{lineno}: invalid JSON ({e.msg})") from None
        msgs = obj.get("messages") if isinstance(obj, dict) else obj
        if not (
            isinstance(msgs, list)
            and msgs
            and all(isinstance(m, dict) and "role" in m and "content" in m for m in msgs)
        ):
            raise ConfigError(
                f'--dataset {p}:{lineno}: expected {{"messages": [{{"role", "content"}}]}}'
            )
        mt = obj.get("max_tokens") if isinstance(obj, dict) else None
        items.append((msgs, int(mt) if isinstance(mt, int) and mt > 0 else None))
    return items


def _sharegpt(p: Path, text: str) -> list[tuple[list[dict[str, Any]], int | None]]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ConfigError(f"--dataset {p}: invalid JSON ({e.msg})") from None
    if not isinstance(doc, list):
        raise ConfigError(f"--dataset {p}: expected a ShareGPT list of conversations")
    items: list[tuple[list[dict[str, Any]], int | None]] = []
    for conv in doc:
        turns = conv.get("conversations") if isinstance(conv, dict) else None
        if not isinstance(turns, list):
            continue
        human = next((t for t in turns if t.get("from") in ("human", "user")), None)
        if human is None or not str(human.get("value", "")).strip():
            continue
        idx = turns.index(human)
        reply = turns[idx + 1] if idx + 1 < len(turns) else None
        answer = max(1, len(str(reply.get("value", ""))) // 4) if reply else None
        items.append(([{"role": "user", "content": str(human["value"])}], answer))
    return items
