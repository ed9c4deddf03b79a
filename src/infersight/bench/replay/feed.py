"""The streamed schedule of a trace replay: the requests of one level, in order, with
their send offsets and bodies, built as the file is read.

A :class:`TraceFeed` is plain data (it crosses to ``--workers`` processes and Ray
actors). Every process reads the whole file in the same order and numbers the selected
requests the same way, so the schedule is one schedule however it is split: request
``i`` goes to worker ``i mod n`` (a conversation's turns all go to the worker its
session id hashes to), and every worker sends at the instants one process would.
Memory stays bounded: a line is parsed, turned into a body when it is this worker's,
and dropped; what is remembered is per shared block or conversation, never per line.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from infersight.bench.level.work import FeedItem
from infersight.bench.replay.formats import TraceEntry
from infersight.bench.replay.read import Problem, in_arrival_order, read_trace
from infersight.bench.replay.text import TextBuilder
from infersight.bench.replay.think import ThinkTime
from infersight.bench.workload import Prompt, build_bodies

__all__ = ["Overhead", "RequestShape", "TraceFeed", "split_feed"]

#: Conversations remembered for the growth of their prompts (least recent dropped).
_SESSIONS = 100_000
#: Requests whose intended sharing is counted (the survey's; the sending processes do
#: not need it, and counting remembers every block seen).
SHARING_COUNTED = 20_000


@dataclass(frozen=True, slots=True)
class Overhead:
    """Tokens the target's chat template adds: ``base`` per prompt plus
    ``per_message`` per message (measured from its ``usage``; 0 when unknown)."""

    base: int = 0
    per_message: int = 0
    measured: bool = False

    def of(self, n_messages: int) -> int:
        return self.base + self.per_message * n_messages


@dataclass(frozen=True, slots=True)
class RequestShape:
    """How every request of a level is written: its text's words (one token each in
    the target's vocabulary) and seed, the model, endpoint and streaming, whether to
    ask for every output token, and the tokens the target's chat template adds."""

    words: tuple[str, ...]
    seed: int
    model: str
    endpoint: str
    stream: bool
    ignore_eos: bool
    overhead: Overhead = Overhead()

    def body(self, messages: list[dict[str, Any]], max_tokens: int) -> dict[str, Any]:
        """The request body for ``messages`` (bench's own body builder)."""
        return build_bodies(
            [Prompt(messages=messages, max_tokens=max_tokens)],
            model=self.model,
            endpoint=self.endpoint,
            stream=self.stream,
            ignore_eos=self.ignore_eos,
        )[0]


def split_feed(feed: Any, n: int) -> list[Any]:
    """``feed`` as ``n`` workers' shares (each reads the same stream, keeps its own)."""
    return [dataclasses.replace(feed, share=w, shares=n) for w in range(n)]


@dataclass(frozen=True, slots=True)
class TraceFeed:
    """One level of a trace replay, as every sending process builds it."""

    path: str
    fmt: str
    max_latency: float
    #: Selected arrival times on the trace's clock: ``[start, end)`` (end None: open).
    start: float
    end: float | None
    speedup: float
    shape: RequestShape
    block_tokens: int = 512
    sessions: bool = False
    limit: int | None = None
    duration: float | None = None
    #: ``--think-time``: for conversation turns whose trace gives no think time.
    think: str = "0s"
    share: int = 0
    shares: int = 1

    def split(self, n: int) -> list[TraceFeed]:
        return split_feed(self, n)

    # -- the selected requests ----------------------------------------------------
    def entries(self) -> Iterator[tuple[int, float, TraceEntry]]:
        """``(index, offset, entry)`` for every selected request (all workers' shares)."""
        first: float | None = None
        index = 0
        last_offset = 0.0
        for item in in_arrival_order(read_trace(self.path, self.fmt), self.fmt, self.max_latency):
            if isinstance(item, Problem):
                continue  # refused or counted by the checking pass
            t = item.t
            if t is None:
                if first is None:
                    continue
                offset = last_offset  # a later turn timed by its think time
            else:
                if t < self.start:
                    continue
                if self.end is not None and t >= self.end:
                    break
                first = t if first is None else first
                offset = (t - first) / self.speedup
            if self.duration is not None and offset >= self.duration:
                break
            if self.limit is not None and index >= self.limit:
                break
            yield index, offset, item
            last_offset = offset
            index += 1

    def _owner(self, index: int, e: TraceEntry) -> int:
        if self.shares == 1:
            return 0
        if self.sessions and e.session is not None:
            digest = hashlib.blake2b(e.session.encode(), digest_size=4).digest()
            return int.from_bytes(digest, "big") % self.shares
        return index % self.shares

    def items(self) -> Iterator[FeedItem]:
        """This worker's requests, bodies built as they are reached."""
        text = TextBuilder(self.shape.words, self.shape.seed, self.block_tokens)
        seen: set[int | str] = set()
        convs: OrderedDict[str, tuple[int, int, int, float | None]] = OrderedDict()
        for index, offset, e in self.entries():
            shared = self._shared(e, seen) if index < SHARING_COUNTED else 0
            mine = self._owner(index, e) == self.share
            if self.sessions and e.session is not None:
                item = self._turn(text, index, offset, e, convs, mine)
            elif e.prefix or self.fmt == "gateway":
                counts = text.counts(e, self._content(e))  # every worker: same counts
                item = self._request(text, index, offset, e, counts) if mine else None
            else:
                item = self._request(text, index, offset, e, None) if mine else None
            if item is not None:
                if not item.shared:
                    item.shared = shared
                item.tokens = item.tokens or e.input_tokens
                yield item

    # -- one request --------------------------------------------------------------
    def _content(self, e: TraceEntry) -> int:
        """Tokens of message text for an access-log line (its count includes the
        template the original server applied; the target's is taken off)."""
        return max(len(e.prefix), e.input_tokens - self.shape.overhead.of(len(e.prefix) or 1))

    def _labels(self, e: TraceEntry, prompt_tokens: int) -> dict[str, str]:
        out = {"out": str(e.output_tokens), "line": str(e.line)}
        if e.text is None:  # a given text's length in tokens is not known
            out["in"] = str(prompt_tokens)
        return out

    def _request(
        self, text: TextBuilder, index: int, offset: float, e: TraceEntry, counts: list[int] | None
    ) -> FeedItem:
        if counts is not None:
            messages = text.messages(e, counts, _own_key(self.shape.seed, index))
            sent, tokens = e.input_tokens, sum(counts)
        else:
            body_text = text.mooncake(e, _own_key(self.shape.seed, index))
            messages = [{"role": "user", "content": body_text}]
            sent, tokens = e.input_tokens + self.shape.overhead.of(1), e.input_tokens
        body = self.shape.body(messages, e.output_tokens)
        return FeedItem(index, offset, self._labels(e, sent), body=body, tokens=tokens)

    def _turn(
        self,
        text: TextBuilder,
        index: int,
        offset: float,
        e: TraceEntry,
        convs: OrderedDict[str, tuple[int, int, int, float | None]],
        mine: bool,
    ) -> FeedItem | None:
        """A conversation turn: the messages it adds to the history. Later turns add
        what the trace's prompt grew by beyond the previous turn and its answer, after
        the think time the trace gives (its ``delay``, or for the access log the time
        from the previous answer's end to this arrival)."""
        assert e.session is not None
        prev = convs.pop(e.session, None)
        turn = 1 if prev is None else prev[2] + 1
        convs[e.session] = (e.input_tokens, e.output_tokens, turn, e.end)
        if len(convs) > _SESSIONS:
            convs.popitem(last=False)
        if not mine:
            return None
        key = _own_key(self.shape.seed, index)
        if prev is None:
            if e.prefix or self.fmt == "gateway":
                msgs = text.messages(e, text.counts(e, self._content(e)), key)
            else:
                msgs = [{"role": "user", "content": text.mooncake(e, key)}]
        else:
            # the access log counts the template: two more messages' worth of it
            grew = (
                e.input_tokens
                - prev[0]
                - prev[1]
                - (self.shape.overhead.per_message * 2 if self.fmt == "gateway" else 0)
            )
            msgs = [{"role": "user", "content": text.words(key, max(1, grew), shared=False)}]
        sent = e.input_tokens + (
            0 if self.fmt == "gateway" else self.shape.overhead.of(2 * turn - 1)
        )
        labels = {**self._labels(e, sent), "session": e.session, "turn": str(turn)}
        history = 0 if prev is None else min(e.input_tokens, prev[0] + prev[1])
        think = e.think
        if prev is not None and think is None and prev[3] is not None and e.t is not None:
            think = max(0.0, e.t - prev[3])
        if think is not None:
            think /= self.speedup  # think times are the trace's time too
        elif prev is not None:
            rng = np.random.default_rng((self.shape.seed, 0x7417, index))
            think = ThinkTime.parse(self.think).sample(rng)
        return FeedItem(
            index,
            offset,
            labels,
            session=e.session,
            turn=turn,
            new_messages=msgs,
            max_tokens=e.output_tokens,
            think=think if prev is not None else None,
            shared=history,
        )

    def _shared(self, e: TraceEntry, seen: set[int | str]) -> int:
        """Intended prompt tokens this request shares with earlier ones: its leading
        blocks (or messages) that an earlier request of the level had."""
        shared, leading = 0, True
        if e.hash_ids:
            left = e.input_tokens
            for h in e.hash_ids:
                take = min(left, self.block_tokens)
                if leading and h in seen:
                    shared += take
                else:
                    leading = False
                seen.add(h)
                left -= take
                if left <= 0:
                    break
        elif e.prefix:
            total = sum(c for _, _, c in e.prefix) or 1
            for _, mh, chars in e.prefix:
                if leading and mh in seen:
                    shared += round(self._content(e) * chars / total)
                else:
                    leading = False
                seen.add(mh)
        return shared


def _own_key(seed: int, index: int) -> int:
    """The key of a request's own text (nobody else's)."""
    return (1 << 62) | ((seed & 0xFFFF) << 40) | index
