"""Batch as a new user meets it: progress lines in CI (no terminal), a summary that says
how the concurrency moved, and a request_id in every answered row."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from infersight.batch import BatchConfig, read_output, run_batch_async
from infersight.batch.progress import PlainProgress, progress_line
from infersight.batch.summary import BatchSummary, concurrency_text
from infersight_testkit.fake.openai import FakeConfig

_LINE = re.compile(
    r"\[\s*(?P<t>[\d.]+)s\] (?P<done>\d+) of 24 rows done, (?P<left>\d+) left: "
    r"[\d.]+ rows/s, \d+ output tok/s, \d+ errors?, concurrency 2, ETA (\S+)"
)


async def test_progress_lines_without_a_terminal(
    tmp_path: Path,
    counting_server: Any,
    write_input: Callable[..., list[str]],
    cli: Callable[..., Awaitable[tuple[int, str, str]]],
) -> None:
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_input(inp, 24, max_tokens=4)
    # 24 rows, 2 at a time, ~0.1 s each: over a second of work, a line every 0.2 s
    async with counting_server(FakeConfig(ttft=0.02, itl=0.02, tokens=4)).running() as srv:
        rc, stdout, err = await cli(
            "batch",
            str(inp),
            "--out",
            str(out),
            "--url",
            srv.base_url,
            "--concurrency",
            "2",
            env={"INFERSIGHT_BATCH_PROGRESS_INTERVAL": "0.2"},
        )
    assert rc == 0, err
    lines = [m for ln in err.splitlines() if (m := _LINE.search(ln))]
    assert len(lines) >= 2, err  # stderr is a pipe here: plain lines, no bar
    done = [int(m["done"]) for m in lines]
    assert done == sorted(done) and all(int(m["done"]) + int(m["left"]) == 24 for m in lines)
    assert [float(m["t"]) for m in lines] == sorted(float(m["t"]) for m in lines)
    assert "concurrency fixed at 2 (--concurrency)" in " ".join(stdout.replace("│", " ").split())


def test_a_line_every_interval_and_its_wording() -> None:
    import io

    now = [100.0]
    stream = io.StringIO()
    p = PlainProgress(stream, interval=10.0, clock=lambda: now[0])
    p.start(1000)
    for t, done in ((5.0, 50), (10.0, 120), (12.0, 150), (20.5, 250)):
        now[0] = 100.0 + t
        p.update(done=done, failed=0, tokens=done * 40, errors=1, limit=8, inflight=8)
    assert stream.getvalue().splitlines() == [
        "[   10.0s] 120 of 1,000 rows done, 880 left: 12.00 rows/s, 480 output tok/s, "
        "1 error, concurrency 8, ETA 1m13s",
        "[   20.5s] 250 of 1,000 rows done, 750 left: 12.20 rows/s, 488 output tok/s, "
        "1 error, concurrency 8, ETA 1m02s",
    ]
    assert progress_line(4.0, 10, done=9, failed=1, tokens=0, errors=3, limit=2).endswith(
        "(1 failed), 0 left: 2.50 rows/s, 0 output tok/s, 3 errors, concurrency 2, ETA done"
    )


def test_the_summary_says_how_the_concurrency_moved() -> None:
    def text(**kw: Any) -> str:
        return concurrency_text(BatchSummary(input="i", output="o", **kw))

    assert (
        text(
            concurrency_start=8,
            concurrency_settled=4.0,
            concurrency_final=4,
            concurrency_max=8,
            concurrency_changes=3,
        )
        == "started at 8, settled at 4 after 3 changes"
    )
    assert text(
        concurrency_start=2,
        concurrency_settled=16.0,
        concurrency_final=12,
        concurrency_max=32,
        concurrency_changes=1,
    ) == ("started at 2, settled at 16 after 1 change (peak 32, 12 at the end)")
    assert (
        text(
            concurrency_start=2,
            concurrency_settled=2.0,
            concurrency_final=2,
            concurrency_max=2,
            concurrency_changes=0,
        )
        == "stayed at 2 (no change was needed)"
    )
    assert text(concurrency_mode="fixed", concurrency_final=4, concurrency_settled=4.0) == (
        "fixed at 4 (--concurrency)"
    )


async def test_every_answered_row_has_a_request_id(
    tmp_path: Path,
    counting_server: Any,
    write_input: Callable[..., list[str]],
) -> None:
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    ids = write_input(inp, 6)
    # a server that names no request (llama.cpp's): the id the request was sent with
    async with counting_server(FakeConfig(tokens=2), names_requests=False).running() as srv:
        s = await run_batch_async(BatchConfig(input=inp, output=out, url=srv.base_url))
    assert s.done == 6
    rows = read_output(out)
    assert {cid: rows[cid]["response"]["request_id"] for cid in ids} == {
        cid: quote(cid, safe="") for cid in ids
    }
    assert all(json.loads(line)["response"]["request_id"] for line in out.read_text().splitlines())
