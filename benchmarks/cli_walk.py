"""The walk from the CLI to the requests (issue 46): the files a reader crosses from
``infersight bench`` to the line that sends a request, and how often the path climbs
back into a file it already left.

It runs ``infersight bench`` (through typer's test runner, in this process) against a
fake server on loopback and, whenever a request is sent, takes the call stack: the
frames of the task that sends it, then those that created that task, and so on up to
the command. Of its frames, those in ``src/infersight`` are the walk, in call order.

- files: distinct files on the walk;
- climbs back: steps of the walk into a file it had already left;
- the walk itself, one file per line (consecutive frames in one file are one step),
  for each distinct walk (the target check's request, then the levels').

Usage: python benchmarks/cli_walk.py
"""

from __future__ import annotations

import asyncio
import tempfile
import traceback
from pathlib import Path
from typing import Any
from unittest import mock

import aiohttp
import uvloop
from typer.testing import CliRunner

import infersight
from infersight.cli import app
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI

SRC = Path(infersight.__file__).parent
_created: dict[int, list[traceback.FrameSummary]] = {}
_walks: list[tuple[str, list[traceback.FrameSummary]]] = []


def _stack_of_task() -> list[traceback.FrameSummary]:
    """This task's frames after those that created it, recursively."""
    frames = traceback.extract_stack()[:-2]
    try:
        task = asyncio.current_task()
    except RuntimeError:  # the loop's first task, created before it runs
        task = None
    created = _created.get(id(task), []) if task is not None else []
    # the loop runs inside the synchronous call that started it: the frames both
    # stacks begin with are one walk, not two
    same = 0
    for a, b in zip(created, frames, strict=False):
        if (a.filename, a.lineno, a.name) != (b.filename, b.lineno, b.name):
            break
        same += 1
    return created + frames[same:]


def _loop_recording_tasks(orig: Any) -> Any:
    """A loop factory whose tasks remember the frames that created them."""

    def factory(loop: asyncio.AbstractEventLoop, coro: Any, **kw: Any) -> asyncio.Task[Any]:
        stack = _stack_of_task()
        task = asyncio.Task(coro, loop=loop, **kw)
        _created[id(task)] = stack
        return task

    def new_event_loop() -> asyncio.AbstractEventLoop:
        loop = orig()
        loop.set_task_factory(factory)
        return loop  # type: ignore[no-any-return]

    return new_event_loop


def _spy(orig: Any) -> Any:
    async def request(*args: Any, **kw: Any) -> Any:
        url = str(args[2] if len(args) > 2 else kw.get("url", ""))
        _walks.append((url.split("/", 3)[-1], _stack_of_task()))
        return await orig(*args, **kw)

    return request


def main() -> None:
    cfg = FakeConfig(ttft=0.01, itl=0.001, tokens=4)
    with (
        tempfile.TemporaryDirectory() as out,
        FakeOpenAI.subprocess(cfg) as srv,
        mock.patch.object(uvloop, "new_event_loop", _loop_recording_tasks(uvloop.new_event_loop)),
        mock.patch.object(aiohttp.ClientSession, "request", _spy(aiohttp.ClientSession.request)),
    ):
        args = ["bench", "--url", srv.base_url, "--requests", "2", "--concurrency", "1"]
        res = CliRunner().invoke(app, [*args, "--no-progress", "--out", out])
    if res.exit_code != 0 or not _walks:
        raise SystemExit(f"bench failed ({res.exit_code}): {res.output[-400:]}")
    seen: set[tuple[str, ...]] = set()
    for path, walk in _walks:
        steps = _steps(walk)
        if tuple(steps) in seen:
            continue
        seen.add(tuple(steps))
        climbs = sum(1 for i, f in enumerate(steps) if f in steps[:i])
        print(f"/{path}: files {len(set(steps))}, climbs back {climbs}, steps {len(steps)}")
        for f in steps:
            print("  " + f)


def _steps(walk: list[traceback.FrameSummary]) -> list[str]:
    """The walk's files in ``src/infersight``, a run of frames in one file one step."""
    steps: list[str] = []
    for fr in walk:
        p = Path(fr.filename)
        if p.is_relative_to(SRC) and (not steps or steps[-1] != str(p.relative_to(SRC))):
            steps.append(str(p.relative_to(SRC)))
    return steps


if __name__ == "__main__":
    main()
