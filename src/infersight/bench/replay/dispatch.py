"""Sending a streamed schedule: a trace replay's requests, and conversations.

:func:`dispatch_feed` walks ``work.feed.items()`` as the open-loop dispatcher walks a
precomputed schedule (the same precise timer, the same ``scheduled`` instants), but
builds the requests as it goes: while it waits for the next send it builds a few
requests ahead (at most :data:`AHEAD` of them, at most :data:`AHEAD_S` seconds
ahead), and stops building a moment before the send, so building never delays one.
Memory holds those few requests, not the trace.

A conversation turn (``item.session``) waits for the turn before it: it is sent at its
release time or ``think`` seconds after the previous answer arrived, whichever is
later, with the conversation so far (every earlier message and the answer actually
received) followed by the messages it adds. A turn whose predecessor failed is still
sent, with the history as it stands (a user goes on after an error).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from infersight.bench.level.work import FeedItem, LevelWork, spawn
from infersight.bench.pacer import Pacer

__all__ = ["Conversations", "dispatch_conversations", "dispatch_feed"]

#: Requests built ahead of their send time, at most.
AHEAD = 256
#: How far ahead of the next send requests are built.
AHEAD_S = 2.0
#: Building stops this long before a send is due.
MARGIN_S = 0.001
#: Conversations kept (their history) after their last turn; least recent dropped.
KEEP_CONVERSATIONS = 10_000

One = Callable[..., Any]


async def dispatch_feed(
    work: LevelWork,
    t0: float,
    stop: Callable[[], bool],
    one: One,
    tasks: set[asyncio.Task[Any]],
) -> None:
    """Send ``work.feed``'s requests at ``t0 + offset``; conversations turn by turn."""
    items: Iterator[FeedItem] = iter(work.feed.items())
    ahead: deque[FeedItem] = deque()
    convs = Conversations(work, one, tasks)
    pacer = Pacer()
    done = False

    def build(until: float, horizon: float) -> None:
        nonlocal done
        while not done and len(ahead) < AHEAD and time.monotonic() < until:
            if ahead and ahead[-1].offset > horizon:
                return
            try:
                ahead.append(next(items))
            except StopIteration:
                done = True

    try:
        while not stop():
            if not ahead:
                build(float("inf"), float("inf"))  # at least one, even when late
                if not ahead:
                    return
            item = ahead[0]
            at = t0 + item.offset
            build(at - MARGIN_S, item.offset + AHEAD_S)
            while (delay := at - time.monotonic()) > 0.1:
                if stop():
                    return
                await asyncio.sleep(min(delay - 0.05, 0.1))
                build(at - MARGIN_S, item.offset + AHEAD_S)
            if stop():
                return
            if delay > 0:
                await pacer.until(at)
            ahead.popleft()
            if item.session is not None:
                convs.turn(item, at)
            else:
                spawn(tasks, one(item.index, at, item.body, item.labels))
    finally:
        pacer.close()


async def dispatch_conversations(
    work: LevelWork,
    t0: float,
    stop: Callable[[], bool],
    one: One,
    tasks: set[asyncio.Task[Any]],
) -> None:
    """Closed loop: ``work.concurrency`` users, each holding one conversation at a time
    and starting the next when it ends."""
    assert work.concurrency is not None
    convs = Conversations(work, one, tasks)
    pending = iter(work.feed.conversations())
    deadline = None if work.duration is None else t0 + work.duration

    async def user() -> None:
        if (delay := t0 - time.monotonic()) > 0:
            await asyncio.sleep(delay)
        while not stop() and (deadline is None or time.monotonic() < deadline):
            conv = next(pending, None)
            if conv is None:
                return
            await convs.run(conv, stop)

    for _ in range(work.concurrency):
        spawn(tasks, user())
    while tasks and not stop():
        await asyncio.wait(tasks, timeout=0.1)


@dataclass(slots=True)
class _Conversation:
    history: list[dict[str, Any]] = field(default_factory=list)
    last_end: float | None = None
    #: The task of the latest turn: the next waits for it.
    tail: asyncio.Task[Any] | None = None


class Conversations:
    """The conversations of one level, each sending its turns in order."""

    def __init__(self, work: LevelWork, one: One, tasks: set[asyncio.Task[Any]]) -> None:
        self._work = work
        self._one = one
        self._tasks = tasks
        self._convs: OrderedDict[str, _Conversation] = OrderedDict()

    def turn(self, item: FeedItem, release: float) -> None:
        """Queue ``item`` behind its conversation's previous turn."""
        assert item.session is not None
        conv = self._convs.pop(item.session, None)
        if conv is None or item.turn == 1:
            conv = _Conversation()
        self._convs[item.session] = conv
        if len(self._convs) > KEEP_CONVERSATIONS:
            self._convs.popitem(last=False)
        prev = conv.tail
        conv.tail = spawn(self._tasks, self._send(conv, item, release, prev))

    async def run(self, items: list[FeedItem], stop: Callable[[], bool]) -> None:
        """One conversation from start to end (closed loop: a user's next conversation
        starts when this one ends)."""
        conv = _Conversation()
        for item in items:
            if stop():
                return
            await self._send(conv, item, time.monotonic(), None)

    async def _send(
        self, conv: _Conversation, item: FeedItem, release: float, prev: asyncio.Task[Any] | None
    ) -> None:
        if prev is not None:
            await asyncio.wait([prev])
        at = release
        if conv.last_end is not None:
            at = max(at, conv.last_end + (item.think or 0.0))
        delay = at - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        conv.history.extend(item.new_messages)
        body = self._work.feed.shape.body(list(conv.history), item.max_tokens)
        done = await self._one(item.index, at, body, item.labels)
        conv.last_end = time.monotonic()
        if done is not None:
            conv.history.append({"role": "assistant", "content": str(done.text)})
