"""A trace replay's or a conversation run's levels: preparation, plans, survey and run.

Before the first level (after the checking pass, so nothing is sent for a bad trace):
the words prompts are made of are checked against the target's tokenizer, and the
tokens its chat template adds are measured from two one-token requests, so that an
access log's prompt counts (which include the original server's template) are
reproduced in the target's. Before each level, the requests it will send are built
once without sending (up to :data:`SURVEY` of them) to measure the prefix sharing of
the text actually sent against the sharing the trace intends, and a few prompts are
counted with ``/tokenize`` to confirm their lengths.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from infersight.bench.config import BenchConfig
from infersight.bench.level_plan import LevelOutcome, LevelPlan
from infersight.bench.level_spec import LevelSpec
from infersight.bench.progress import LiveDisplay, LiveStats
from infersight.bench.replay.check import parse_window, trace_summary
from infersight.bench.replay.feed import SHARING_COUNTED, Overhead, RequestShape, TraceFeed
from infersight.bench.replay.sessions import SessionFeed, session_starts
from infersight.bench.target import Target
from infersight.bench.workload import SyntheticPrompts, Tokenize
from infersight.core import errors as E

__all__ = [
    "LEAD_S",
    "ReplayPrep",
    "level_plan",
    "prepare_replay",
    "run_replay_level",
    "survey",
    "trace_times",
]

#: Requests built before a level to measure the sharing of the text sent.
SURVEY = SHARING_COUNTED
#: Prompts whose length is confirmed with /tokenize before a level.
VERIFY = 8
#: Characters per chunk when comparing sent texts.
_CHUNK = 32
#: A single process starts a replay this long after it is planned, so the requests due
#: first are built before they are due.
LEAD_S = 0.25

Execute = Callable[[LevelPlan, LiveStats, float], Awaitable[LevelOutcome]]


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
    cfg: BenchConfig, client: Any, path: str, model: str, tokenize: Tokenize | None
) -> ReplayPrep:
    gen = SyntheticPrompts(tokenize, cfg.seed)
    await gen.prepare()
    overhead = await measure_overhead(client, path, model, cfg.endpoint)
    prep = ReplayPrep(gen.vocabulary, gen.exact, overhead)
    if cfg.trace:
        s = trace_summary(cfg)
        prep.desc = {
            **s.describe(),
            "window": cfg.trace_window,
            "block_size": cfg.block_size,
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
            "sessions": cfg.sessions,
            "turns": cfg.turns,
            "think_time": cfg.think_time,
            "input_tokens": cfg.input_tokens,
            "shared_prefix_tokens": cfg.shared_prefix,
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
    cfg: BenchConfig,
    level: LevelSpec,
    prep: ReplayPrep,
    target: Target,
    tokenize: Tokenize | None,
    execute: Execute,
    display: LiveDisplay,
) -> tuple[LevelOutcome, dict[str, Any]]:
    """Run the level; return its outcome and what its aggregate needs besides the
    records: the rate its schedule offered and the survey of what it sent."""
    plan, total, rate = level_plan(cfg, level, prep, model=target.model, path=target.path)
    info = await survey(plan, tokenize)
    live = LiveStats(total=total, duration=cfg.duration)
    display.show(level.name, live)
    outcome = await execute(plan, live, LEAD_S)
    return outcome, {"rate": rate, "survey": info}


def trace_times(cfg: BenchConfig, speedup: float) -> np.ndarray:
    """The send offsets of one level (seconds from its first send), as the feed will
    produce them: the window, then ``--requests`` and ``--duration``."""
    s = trace_summary(cfg)
    i, j = s.select(parse_window(cfg.trace_window))
    t = s.times[i:j]
    off = (t - t[0]) / speedup if t.size else t
    if cfg.duration is not None:
        off = off[off < cfg.duration]
    if cfg.requests is not None:
        off = off[: cfg.requests]
    return off


def level_plan(
    cfg: BenchConfig, level: LevelSpec, prep: ReplayPrep, *, model: str, path: str
) -> tuple[LevelPlan, int | None, float | None]:
    """The level's plan, its request count (None: unknown in a closed loop) and the
    rate its schedule offers (for the sustainability check)."""
    feed: TraceFeed | SessionFeed
    rate: float | None = None
    shape = RequestShape(
        prep.words, cfg.seed, model, cfg.endpoint, cfg.stream, cfg.ignore_eos, prep.overhead
    )
    if cfg.trace:
        s = trace_summary(cfg)
        a, b = parse_window(cfg.trace_window)
        speed = level.speedup or 1.0
        feed = TraceFeed(
            s.path,
            s.fmt,
            s.max_latency,
            s.origin + a,
            None if b is None else s.origin + b,
            speed,
            shape,
            block_tokens=cfg.block_size,
            sessions=s.sessions > 0,
            limit=cfg.requests,
            duration=cfg.duration,
            think=cfg.think_time,
        )
        off = trace_times(cfg, speed)
        total: int | None = int(off.size)
        if off.size > 1 and off[-1] > 0:
            rate = (off.size - 1) / float(off[-1])
    else:
        assert cfg.sessions is not None
        starts: tuple[float, ...] = ()
        if level.rate is not None:
            starts = session_starts(
                level.rate, cfg.sessions, level.arrival, cfg.burstiness, cfg.seed
            )
        feed = SessionFeed(
            cfg.sessions,
            cfg.turns,
            cfg.think_time,
            cfg.input_tokens,
            cfg.output_tokens,
            cfg.max_tokens,
            cfg.shared_prefix,
            shape,
            starts=starts,
            tag=f"{uuid.uuid4().hex[:8]}-",
        )
        total = None
    plan = LevelPlan(
        name=level.name,
        path=path,
        bodies=(),
        concurrency=level.concurrency,
        duration=None if cfg.trace else cfg.duration,
        timeout=cfg.timeout,
        grace=cfg.grace,
        feed=feed,
    )
    return plan, total, rate


async def survey(plan: LevelPlan, tokenize: Tokenize | None) -> dict[str, Any]:
    """Prefix sharing intended against sent, over the level's first requests built as
    they will be sent; and a few prompts' lengths checked with the target's tokenizer."""
    seen: set[int] = set()
    intended = tokens = shared_chars = chars = n = 0
    samples: list[tuple[str, int]] = []
    for item in plan.feed.items():
        if n >= SURVEY:
            break
        n += 1
        intended += item.shared
        tokens += item.tokens
        if item.body is None:
            continue
        text = _text(item.body)
        sc = _shared_chars(text, seen)
        shared_chars, chars = shared_chars + sc, chars + len(text)
        msgs = item.body.get("messages")
        if len(samples) < VERIFY and isinstance(msgs, list) and len(msgs) == 1:
            samples.append((str(msgs[0].get("content")), item.tokens))
    out: dict[str, Any] = {
        "measured_on": n,
        "intended": intended / tokens if tokens else None,
        "sent": shared_chars / chars if chars else None,
    }
    if tokenize is not None and samples:
        errs = []
        for text, want in samples:
            got = await tokenize(text)
            if got is None:
                break
            errs.append(len(got) - want)
        if errs:
            out["tokenize_checked"] = len(errs)
            out["tokenize_max_error"] = max(abs(e) for e in errs)
    return out


def _text(body: dict[str, Any]) -> str:
    msgs = body.get("messages")
    if isinstance(msgs, list):
        return "".join(f"{m.get('role')}\x00{m.get('content')}\x01" for m in msgs)
    return str(body.get("prompt", ""))


def _shared_chars(text: str, seen: set[int]) -> int:
    """Characters at the start of ``text`` that an earlier text began with (compared
    by chunks chained from the start, as a prefix cache compares blocks)."""
    h, shared, leading = 0, 0, True
    for i in range(0, len(text), _CHUNK):
        piece = text[i : i + _CHUNK]
        h = hash((h, piece))
        if leading and len(piece) == _CHUNK and h in seen:
            shared += len(piece)
        else:
            leading = False
        seen.add(h)
    return shared
