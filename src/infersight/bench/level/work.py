"""One load level's work for one process (:class:`LevelWork`) and what it gave back
(:class:`LevelOutcome`), and one request of a streamed schedule (:class:`FeedItem`): the
types the executor, the streamed replay, the worker
processes and the Ray workers all pass around, so none of them imports another for them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from infersight.core.records import RequestRecord

__all__ = ["FeedItem", "LevelOutcome", "LevelWork", "RequestSender", "spawn"]


class RequestSender(Protocol):
    """What the executor needs from :class:`infersight.client.Client`."""

    async def request(
        self,
        path: str,
        body: dict[str, Any],
        *,
        scheduled: float | None = None,
        deadline: float | None = None,
        request_id: str | None = None,
        headers: dict[str, str] | None = None,
        record: RequestRecord | None = None,
    ) -> Any: ...


@dataclass(slots=True)
class LevelWork:
    """One level's work for one process.

    Open loop: ``slots`` lists (request index, offset from t0). Closed loop:
    ``concurrency`` users take indices from ``next_index`` until ``limit`` requests were
    taken or ``duration`` has passed. Request ``i`` sends ``bodies[i % len(bodies)]``.
    """

    name: str
    path: str
    bodies: Sequence[dict[str, Any]]
    concurrency: int | None = None
    slots: list[tuple[int, float]] = field(default_factory=list)
    duration: float | None = None
    limit: int | None = None
    timeout: float = 600.0
    grace: float = 5.0
    labels: dict[str, str] = field(default_factory=dict)
    #: A streamed schedule (trace replay, conversations) used instead of ``slots`` and
    #: ``bodies``: ``feed.items()`` yields each request as it is reached
    #: (:mod:`infersight.bench.replay.dispatch`).
    feed: Any = None


@dataclass(slots=True)
class LevelOutcome:
    """A level's records and the load generator's cost: ``cpu_percent`` of one core
    for the busiest process, ``cpu_seconds`` summed over all of them."""

    records: list[RequestRecord]
    cpu_percent: float
    wall: float
    cpu_seconds: float = 0.0


@dataclass(slots=True)
class FeedItem:
    """One request of the schedule."""

    index: int
    offset: float
    labels: dict[str, str]
    #: The request body; None for a conversation turn (built from its history).
    body: dict[str, Any] | None = None
    #: Conversation turns: the messages this turn adds, and the think time before it.
    session: str | None = None
    turn: int = 0
    new_messages: list[dict[str, Any]] = field(default_factory=list)
    max_tokens: int = 0
    think: float | None = None
    #: Intended prompt tokens shared with an earlier request of the level, and the
    #: prompt's own intended tokens (message text, without the chat template).
    shared: int = 0
    tokens: int = 0


def spawn(tasks: set[asyncio.Task[Any]], coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
    """Run ``coro`` as a task kept in ``tasks`` until it ends; the task."""
    task = asyncio.ensure_future(coro)
    tasks.add(task)
    task.add_done_callback(tasks.discard)
    return task
