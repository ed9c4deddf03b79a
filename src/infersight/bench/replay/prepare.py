"""A trace replay's or a conversation run's levels: preparation, work, survey and run.

Before the first level (after the checking pass, so nothing is sent for a bad trace):
the words prompts are made of are checked against the target's tokenizer, and the
tokens its chat template adds are measured from two one-token requests, so that an
access log's prompt counts (which include the original server's template) are
reproduced in the target's. Before each level, the requests it will send are built
once without sending (:mod:`infersight.bench.replay.survey`) to measure the prefix
sharing of the text actually sent against the sharing the trace intends, and a few
prompts are counted with ``/tokenize`` to confirm their lengths.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from infersight.bench.level.spec import LevelSpec
from infersight.bench.level.work import LevelOutcome, LevelWork
from infersight.bench.progress import LiveDisplay, LiveStats
from infersight.bench.replay.check import parse_window, trace_summary
from infersight.bench.replay.feed import Overhead, RequestShape, TraceFeed
from infersight.bench.replay.sessions import SessionFeed, session_starts
from infersight.bench.replay.survey import survey
from infersight.bench.target import Target
from infersight.bench.workload import SyntheticPrompts, Tokenize
from infersight.core import errors as E
from infersight.flags.bench import LoadSection, ReplaySection, TargetSection, WorkloadSection

__all__ = [
    "ReplaySetup",
    "prepare_replay",
    "run_replay_level",
    "survey",
]

#: A single process starts a replay this long after it is planned, so the requests due
#: first are built before they are due.
LEAD_S = 0.25

Execute = Callable[[LevelWork, LiveStats, float], Awaitable[LevelOutcome]]


@dataclass(frozen=True, slots=True)
class ReplaySetup:
    """The configuration sections a replay or conversation level reads."""

    replay: ReplaySection
    workload: WorkloadSection
    load: LoadSection
    target: TargetSection


@dataclass(slots=True)
class ReplayPrep:
    words: tuple[str, ...]
    exact: bool
    overhead: Overhead
    desc: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


async def _prompt_tokens(client: Any, path: str, body: dict[str, Any]) -> int | None:
    done = await client.request(path, body)
    n = (done.usage or {}).get("prompt_tokens")
    return n if isinstance(n, int) else None


async def measure_overhead(client: Any, path: str, model: str, endpoint: str) -> Overhead:
    """The target's chat-template tokens, from two one-token requests' ``usage``."""

    def body(msgs: list[dict[str, str]]) -> dict[str, Any]:
        b: dict[str, Any] = {"model": model, "max_tokens": 1, "stream": False}
        if endpoint == "chat":
            b["messages"] = msgs
        else:
            b["prompt"] = msgs[0]["content"]
        return b

    one = [{"role": "user", "content": "the"}]
    three = [*one, {"role": "assistant", "content": "the"}, *one]
    try:
        u1 = await _prompt_tokens(client, path, body(one))
        u3 = await _prompt_tokens(client, path, body(three)) if endpoint == "chat" else u1
    except E.InfersightError:
        return Overhead()
    if u1 is None or u3 is None:
        return Overhead()
    per = max(0, (u3 - u1 - 2) // 2) if endpoint == "chat" else 0
    return Overhead(base=max(0, u1 - 1 - per), per_message=per, measured=True)


async def prepare_replay(
    setup: ReplaySetup, client: Any, path: str, model: str, tokenize: Tokenize | None
) -> ReplayPrep:
    replay, workload = setup.replay, setup.workload
    gen = SyntheticPrompts(tokenize, workload.seed)
    await gen.prepare()
    overhead = await measure_overhead(client, path, model, setup.target.endpoint)
    prep = ReplayPrep(gen.vocabulary, gen.exact, overhead)
    if replay.trace:
        s = trace_summary(replay)
        prep.desc = {
            **s.describe(),
            "window": replay.trace_window,
            "block_size": replay.block_size,
            "conversations": bool(s.sessions),
        }
        if s.bad:
            prep.notes.append(
                f"trace: {s.bad} unusable line(s) skipped (--on-bad-line skip), "
                f"e.g. {s.bad_shown[0]}"
            )
        for why, n in s.passed_over.items():
            prep.notes.append(f"trace: {n} line(s) not replayed: {why}")
    else:
        prep.desc = {
            "source": "conversations",
            "sessions": replay.sessions,
            "turns": replay.turns,
            "think_time": replay.think_time,
            "input_tokens": workload.input_tokens,
            "shared_prefix_tokens": workload.shared_prefix,
        }
    prep.desc.update(
        lengths_exact=gen.exact,
        template_tokens={
            "base": overhead.base,
            "per_message": overhead.per_message,
            "measured": overhead.measured,
        },
    )
    if not gen.exact:
        prep.notes.append(
            "trace prompts: the target offers no /tokenize, so lengths count "
            "words that are usually one token each"
        )
    return prep


async def run_replay_level(
    setup: ReplaySetup,
    level: LevelSpec,
    prep: ReplayPrep,
    target: Target,
    tokenize: Tokenize | None,
    execute: Execute,
    display: LiveDisplay,
) -> tuple[LevelOutcome, dict[str, Any]]:
    """Run the level; return its outcome and what its aggregate needs besides the
    records: the rate its schedule offered and the survey of what it sent."""
    work, total, rate = replay_work(setup, level, prep, model=target.model, path=target.path)
    info = await survey(work, tokenize)
    live = LiveStats(total=total, duration=setup.load.duration)
    display.show(level.name, live)
    outcome = await execute(work, live, LEAD_S)
    return outcome, {"rate": rate, "survey": info}


def trace_times(replay: ReplaySection, load: LoadSection, speedup: float) -> np.ndarray:
    """The send offsets of one level (seconds from its first send), as the feed will
    produce them: the window, then ``--requests`` and ``--duration``."""
    s = trace_summary(replay)
    i, j = s.select(parse_window(replay.trace_window))
    t = s.times[i:j]
    off = (t - t[0]) / speedup if t.size else t
    if load.duration is not None:
        off = off[off < load.duration]
    if load.requests is not None:
        off = off[: load.requests]
    return off


def replay_work(
    setup: ReplaySetup, level: LevelSpec, prep: ReplayPrep, *, model: str, path: str
) -> tuple[LevelWork, int | None, float | None]:
    """The level's work, its request count (None: unknown in a closed loop) and the
    rate its schedule offers (for the sustainability check)."""
    replay, workload, load, tgt = setup.replay, setup.workload, setup.load, setup.target
    feed: TraceFeed | SessionFeed
    rate: float | None = None
    shape = RequestShape(
        prep.words,
        workload.seed,
        model,
        tgt.endpoint,
        tgt.stream,
        workload.ignore_eos,
        prep.overhead,
    )
    if replay.trace:
        s = trace_summary(replay)
        a, b = parse_window(replay.trace_window)
        speed = level.speedup or 1.0
        feed = TraceFeed(
            s.path,
            s.fmt,
            s.max_latency,
            s.origin + a,
            None if b is None else s.origin + b,
            speed,
            shape,
            block_tokens=replay.block_size,
            sessions=s.sessions > 0,
            limit=load.requests,
            duration=load.duration,
            think=replay.think_time,
        )
        off = trace_times(replay, load, speed)
        total: int | None = int(off.size)
        if off.size > 1 and off[-1] > 0:
            rate = (off.size - 1) / float(off[-1])
    else:
        assert replay.sessions is not None
        starts: tuple[float, ...] = ()
        if level.rate is not None:
            starts = session_starts(
                level.rate, replay.sessions, level.arrival, load.burstiness, workload.seed
            )
        feed = SessionFeed(
            replay.sessions,
            replay.turns,
            replay.think_time,
            workload.input_tokens,
            workload.output_tokens,
            workload.max_tokens,
            workload.shared_prefix,
            shape,
            starts=starts,
            tag=f"{uuid.uuid4().hex[:8]}-",
        )
        total = None
    work = LevelWork(
        name=level.name,
        path=path,
        bodies=(),
        concurrency=level.concurrency,
        duration=None if replay.trace else load.duration,
        timeout=tgt.timeout,
        grace=load.grace,
        feed=feed,
    )
    return work, total, rate
