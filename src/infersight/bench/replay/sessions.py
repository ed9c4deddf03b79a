"""``--sessions N``: synthetic conversations, each turn sent with its whole history.

A conversation has ``--turns`` turns (a length distribution, default ``fixed:4``).
Its first message is ``--input-tokens`` long, after the ``--shared-prefix`` system
prompt every conversation shares when one is asked for; every later user message is
``--input-tokens`` long too, and each answer is capped by ``--output-tokens`` or
``--max-tokens``. Between an answer and the next turn the user thinks for
``--think-time`` (``fixed:2s``, ``uniform:1s:5s``, ``exponential:3s``; default 0).

Load: ``--rate R`` starts R conversations per second (open loop); ``--concurrency C``
keeps C conversations going, a new one starting when one ends (closed loop). A level
runs N conversations; conversation ``s`` belongs to worker ``s mod n``. TTFT is
reported per turn index: later turns have longer prompts and more prefix to reuse.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from infersight.bench.level.work import FeedItem
from infersight.bench.replay.feed import RequestShape, split_feed
from infersight.bench.replay.text import TextBuilder
from infersight.bench.replay.think import ThinkTime
from infersight.bench.schedule import open_loop_schedule
from infersight.bench.workload import Distribution

__all__ = ["SessionFeed", "session_starts"]

#: Index stride per conversation (request ids stay unique with up to this many turns).
TURN_STRIDE = 1000
#: The shared system prompt's text key.
_SYSTEM_KEY = 7 << 56


@dataclass(frozen=True, slots=True)
class SessionFeed:
    """The conversations of one level (plain data, like a trace feed)."""

    sessions: int
    turns: str
    think: str
    input_tokens: str
    output_tokens: str | None
    max_tokens: int
    shared_prefix: int
    shape: RequestShape
    #: Open loop: each conversation's start offset; empty in a closed loop.
    starts: tuple[float, ...] = ()
    #: Prefix of the conversation ids (unique per run: a gateway logs them).
    tag: str = ""
    share: int = 0
    shares: int = 1

    def split(self, n: int) -> list[SessionFeed]:
        return split_feed(self, n)

    def conversations(self) -> Iterator[list[FeedItem]]:
        """This worker's conversations, each as its list of turns."""
        seed = self.shape.seed
        text = TextBuilder(self.shape.words, seed)
        turns = Distribution.parse(self.turns, "--turns")
        think = ThinkTime.parse(self.think)
        n_in = Distribution.parse(self.input_tokens, "--input-tokens")
        n_out = (
            Distribution.parse(self.output_tokens, "--output-tokens")
            if self.output_tokens
            else None
        )
        for s in range(self.share, self.sessions, self.shares):
            rng = np.random.default_rng((seed, 0x5E55, s))
            k = min(TURN_STRIDE - 1, turns.sample(1, rng)[0])
            lens = n_in.sample(k, rng)
            outs = n_out.sample(k, rng) if n_out else [self.max_tokens] * k
            start = self.starts[s] if self.starts else 0.0
            items = []
            history = self.shared_prefix
            for t in range(k):
                msgs = [
                    {"role": "user", "content": text.words(_key(seed, s, t), lens[t], shared=False)}
                ]
                if t == 0 and self.shared_prefix:
                    msgs.insert(
                        0,
                        {"role": "system", "content": text.words(_SYSTEM_KEY, self.shared_prefix)},
                    )
                n_msgs = 2 * t + 1 + (1 if self.shared_prefix else 0)
                labels = {
                    "in": str(history + lens[t] + self.shape.overhead.of(n_msgs)),
                    "out": str(outs[t]),
                    "session": f"{self.tag}s{s}",
                    "turn": str(t + 1),
                }
                items.append(
                    FeedItem(
                        s * TURN_STRIDE + t,
                        start,
                        labels,
                        session=f"{self.tag}s{s}",
                        turn=t + 1,
                        new_messages=msgs,
                        max_tokens=outs[t],
                        think=None if t == 0 else think.sample(rng),
                        # what the conversation's previous turn sent and received
                        shared=history if t > 0 else 0,
                        tokens=history + lens[t],
                    )
                )
                history += lens[t] + outs[t]
            yield items

    def items(self) -> Iterator[FeedItem]:
        """Every turn in start order (open loop: turns after the first are released at
        the conversation's start and wait for its previous answer)."""
        for conv in self.conversations():
            yield from conv


def _key(seed: int, session: int, turn: int) -> int:
    return (3 << 60) | ((seed & 0xFFFF) << 40) | (session << 10) | turn


def session_starts(
    rate: float, n: int, arrival: str, burstiness: float, seed: int
) -> tuple[float, ...]:
    """Open-loop conversation starts (the bench's arrival processes)."""
    if math.isinf(rate):
        return tuple([0.0] * n)
    return tuple(
        float(x)
        for x in open_loop_schedule(
            rate, arrival=arrival, burstiness=burstiness, requests=n, seed=seed
        )
    )
