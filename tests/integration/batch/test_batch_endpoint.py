"""The server a batch runs on is opened only once there are rows to run: a rerun of a
finished batch starts no embedded engine."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from infersight.batch import BatchConfig, read_output, run_batch_async
from infersight.core.endpoint import Endpoint
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI

Cli = Callable[..., Awaitable[tuple[int, str, str]]]


async def test_the_opener_is_called_only_when_rows_are_left(
    tmp_path: Path, write_input: Callable[..., list[str]]
) -> None:
    ids = write_input(tmp_path / "in.jsonl", 5)
    out = tmp_path / "out.jsonl"
    opened: list[str] = []
    async with FakeOpenAI(FakeConfig(tokens=2)).running() as srv:

        @contextlib.asynccontextmanager
        async def opener() -> AsyncIterator[Endpoint]:
            opened.append("open")
            yield Endpoint(srv.base_url, started_by="test", slots=2, model="fake")
            opened.append("close")

        cfg = BatchConfig(input=tmp_path / "in.jsonl", output=out, concurrency=2)
        first = await run_batch_async(cfg, endpoint=opener)
        assert first.done == 5 and opened == ["open", "close"]
        assert sorted(read_output(out)) == ids
        again = await run_batch_async(cfg, endpoint=opener)
    assert again.stopped == "nothing-to-do" and again.done == 0
    assert opened == ["open", "close"]  # not opened for a batch with nothing left


async def test_a_finished_batch_reruns_without_url_and_starts_no_engine(
    tmp_path: Path, write_input: Callable[..., list[str]], cli: Cli
) -> None:
    write_input(tmp_path / "in.jsonl", 3)
    out = tmp_path / "out.jsonl"
    async with FakeOpenAI(FakeConfig(tokens=2)).running() as srv:
        rc, _, err = await cli(
            "batch",
            str(tmp_path / "in.jsonl"),
            "--out",
            str(out),
            "--url",
            srv.base_url + "/v1",
            "-q",
        )
        assert rc == 0, err
    # No --url now: the engine would be started (and say so on stderr) only for rows.
    rc, stdout, err = await cli("batch", str(tmp_path / "in.jsonl"), "--out", str(out))
    assert rc == 0, stdout + err
    assert "starting the embedded engine" not in err
    assert "nothing-to-do" in stdout and "3 already in output" in stdout
