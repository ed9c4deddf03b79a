"""The survey of a replay level before it runs: the prefix sharing of the text that
will be sent against the sharing the trace intends, over the level's first requests
built as they will be sent, and a few prompts' lengths checked with ``/tokenize``."""

from __future__ import annotations

from typing import Any

from infersight.bench.level.work import LevelWork
from infersight.bench.replay.feed import SHARING_COUNTED
from infersight.bench.workload import Tokenize

__all__ = ["survey"]

#: Requests built before a level to measure the sharing of the text sent.
SURVEY = SHARING_COUNTED
#: Prompts whose length is confirmed with /tokenize before a level.
VERIFY = 8
#: Characters per chunk when comparing sent texts.
_CHUNK = 32


async def survey(work: LevelWork, tokenize: Tokenize | None) -> dict[str, Any]:
    """Prefix sharing intended against sent, over the level's first requests built as
    they will be sent; and a few prompts' lengths checked with the target's tokenizer."""
    seen: set[int] = set()
    intended = tokens = shared_chars = chars = n = 0
    samples: list[tuple[str, int]] = []
    for item in work.feed.items():
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
