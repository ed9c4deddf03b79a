"""The scheduler: sends one load level's requests at their intended times.

Open loop: a single dispatcher walks the precomputed schedule and starts each request
at ``t0 + offset``; the request's record holds that instant as ``scheduled``, so any
delay the client adds shows up as schedule lag and in TTFT (docs/design.md section 2).
Closed loop: N user coroutines each send the next request as soon as their previous
one ends; ``scheduled`` is the moment the user became free.

Stopping (Ctrl-C): no new request starts; requests in flight get ``grace`` seconds,
then are cancelled and marked ``cancelled`` with error kind ``Cancelled``.

Pauses of the event loop are schedule lag, so a level keeps them short: the dispatcher
waits on a precise timer instead of polling (:mod:`.pacer`), and the garbage
collector never walks the records of the requests already done (see :func:`_young_gc`).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Callable, Iterator
from typing import Any

import psutil

from infersight.bench.level.work import LevelOutcome, LevelWork, RequestSender, spawn
from infersight.bench.pacer import Pacer
from infersight.bench.progress import LiveStats
from infersight.bench.replay.dispatch import dispatch_conversations, dispatch_feed
from infersight.core.access_log_format import SESSION_HEADER
from infersight.core.errors import InfersightError
from infersight.core.records import RequestRecord

__all__ = ["run_level"]


async def run_level(
    client: RequestSender,
    work: LevelWork,
    *,
    t0: float,
    stop: Callable[[], bool],
    hard_stop: Callable[[], bool] = lambda: False,
    next_index: Callable[[], int | None] | None = None,
    live: LiveStats | None = None,
) -> LevelOutcome:
    """Run the work from monotonic time ``t0``; return every record and our CPU use."""
    proc = psutil.Process()
    cpu0 = proc.cpu_times()
    wall0 = time.monotonic()
    records: list[RequestRecord] = []
    live = live or LiveStats()
    tasks: set[asyncio.Task[None]] = set()

    async def one(
        index: int,
        scheduled: float,
        body: dict[str, Any] | None = None,
        labels: dict[str, str] | None = None,
    ) -> Any:
        """Send request ``index``; return the client's completion (None on failure)."""
        rec = RequestRecord(
            request_id=f"{work.name}-{index}",
            scheduled=scheduled,
            labels={"level": work.name, **work.labels, **(labels or {})},
        )
        live.started()
        if body is None:
            body = work.bodies[index % len(work.bodies)]
        done: Any = None
        try:
            # Resends on dropped keep-alive connections are the client's (docs/design.md s.3).
            # A conversation's turns say which conversation they belong to (a gateway
            # logs it: docs/access-log.md), as a chat front end would.
            session = rec.labels.get("session")
            extra = {} if session is None else {"headers": {SESSION_HEADER: session}}
            done = await client.request(
                work.path,
                dict(body),
                scheduled=scheduled,
                deadline=scheduled + work.timeout,
                request_id=rec.request_id,
                record=rec,
                **extra,
            )
            rec = _adopt(rec, getattr(done, "record", None))
        except asyncio.CancelledError:
            rec.cancelled, rec.ok, rec.error = True, False, "Cancelled"
            rec.error_message = (
                f"cancelled after the {work.grace:g}s grace period (the run was stopped)"
            )
            raise
        except InfersightError as e:
            rec = _adopt(rec, getattr(e, "record", None))
            rec.ok = False
            rec.error = rec.error or e.kind
            rec.error_message = rec.error_message or str(e)
        except Exception as e:
            rec.ok, rec.error = False, type(e).__name__
            rec.error_message = str(e)[:300]
        finally:
            if rec.end is None and not rec.cancelled:
                rec.end = time.monotonic()
            records.append(rec)
            live.finished(rec)
        return done if rec.ok else None

    with _young_gc():
        if work.feed is not None:
            if work.concurrency is None:
                await dispatch_feed(work, t0, stop, one, tasks)
            else:
                await dispatch_conversations(work, t0, stop, one, tasks)
        elif work.concurrency is None:
            await _dispatch_open(work, t0, stop, one, tasks)
        else:
            take = next_index or _counter(work.limit)
            await _dispatch_closed(work, t0, stop, one, tasks, take)
        await _wind_down(tasks, work.grace, stop, hard_stop)
    cpu1 = proc.cpu_times()
    wall = time.monotonic() - wall0
    used = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    return LevelOutcome(records, 100.0 * used / wall if wall > 0 else 0.0, wall, used)


#: Seconds between moves of the surviving objects out of the collector's reach.
_FREEZE_EVERY = 1.0


@contextlib.contextmanager
def _young_gc() -> Iterator[None]:
    """During a level the collector only walks young objects.

    A full collection walks every live object, and a level keeps thousands of records
    (a minute at 1,000 requests/s is 60,000 of them, a quarter of a million objects):
    tens of milliseconds with the loop stopped, which is schedule lag. Everything alive
    is frozen (``gc.freeze``) at the start and again every second, so collections only
    see what was made since; a request's own objects are freed by reference counting
    (its steady path leaves no cycles behind, tested). The frozen objects are handed
    back to the collector when the level ends.
    """
    loop = asyncio.get_running_loop()
    gc.freeze()
    handle: asyncio.TimerHandle | None = None

    def again() -> None:
        nonlocal handle
        gc.freeze()
        handle = loop.call_later(_FREEZE_EVERY, again)

    handle = loop.call_later(_FREEZE_EVERY, again)
    try:
        yield
    finally:
        handle.cancel()
        gc.unfreeze()


async def _wind_down(
    tasks: set[asyncio.Task[None]],
    grace: float,
    stop: Callable[[], bool],
    hard_stop: Callable[[], bool],
) -> None:
    """Wait for the requests in flight; once stopping, give them ``grace`` seconds,
    then cancel what is left."""
    # Either finished normally (open loop waits for its last requests) or stopping.
    while tasks and not stop():
        await asyncio.wait(tasks, timeout=0.1)
    if tasks:
        end_grace = time.monotonic() + grace
        while tasks and time.monotonic() < end_grace and not hard_stop():
            await asyncio.wait(tasks, timeout=0.1)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _dispatch_closed(
    work: LevelWork,
    t0: float,
    stop: Callable[[], bool],
    one: Callable[[int, float], Any],
    tasks: set[asyncio.Task[None]],
    take: Callable[[], int | None],
) -> None:
    """``work.concurrency`` users, each sending its next request when the last ended."""
    assert work.concurrency is not None
    deadline = None if work.duration is None else t0 + work.duration

    async def user() -> None:
        delay = t0 - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        while not stop() and (deadline is None or time.monotonic() < deadline):
            i = take()
            if i is None:
                return
            await one(i, time.monotonic())

    for _ in range(work.concurrency):
        spawn(tasks, user())
    while tasks and not stop():
        await asyncio.wait(tasks, timeout=0.1)


async def _dispatch_open(
    work: LevelWork,
    t0: float,
    stop: Callable[[], bool],
    one: Callable[[int, float], Any],
    tasks: set[asyncio.Task[None]],
) -> None:
    pacer = Pacer()  # never before the intended time, and no polling until then
    try:
        for index, offset in work.slots:
            at = t0 + offset
            # Sleep in slices while far away so Ctrl-C is seen; the last wait is exact.
            while (delay := at - time.monotonic()) > 0.1:
                if stop():
                    return
                await asyncio.sleep(min(delay - 0.05, 0.1))
            if stop():
                return
            if delay > 0:
                await pacer.until(at)
            spawn(tasks, one(index, at))
    finally:
        pacer.close()


def _counter(n: int | None) -> Callable[[], int | None]:
    state = [0]

    def take() -> int | None:
        if n is not None and state[0] >= n:
            return None
        state[0] += 1
        return state[0] - 1

    return take


def _adopt(mine: RequestRecord, theirs: RequestRecord | None) -> RequestRecord:
    """Use the client's record if it made its own, keeping our id and labels."""
    if theirs is None or theirs is mine:
        return mine
    theirs.request_id = mine.request_id
    theirs.scheduled = mine.scheduled
    theirs.labels = {**mine.labels, **theirs.labels}
    return theirs
