"""Never lose a row: SIGKILL halfway and rerun; Ctrl-C; --retry-failed."""

from __future__ import annotations

import asyncio
import json
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from infersight.batch import read_output
from infersight_testkit.fake.openai import FakeConfig
from support.waiting import until

Cli = Callable[..., Awaitable[tuple[int, str, str]]]


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_bytes().splitlines()]


def count_lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


async def wait_for_rows(
    path: Path, n: int, proc: asyncio.subprocess.Process, timeout: float = 60
) -> None:

    def reached() -> bool:
        assert proc.returncode is None, "the batch ended before it was interrupted"
        return count_lines(path) >= n

    await until(reached, f"{path} to reach {n} rows", timeout)


async def test_sigkill_halfway_then_rerun_sends_no_checkpointed_row_again(
    tmp_path: Path,
    write_input: Callable[..., list[str]],
    counting_server: Any,
    spawn_cli: Callable[..., Awaitable[asyncio.subprocess.Process]],
    cli: Cli,
) -> None:
    ids = write_input(tmp_path / "in.jsonl", 200)
    out = tmp_path / "out.jsonl"
    async with counting_server(FakeConfig(ttft=0.05, itl=0.02, tokens=8)).running() as srv:
        args = ("batch", str(tmp_path / "in.jsonl"), "--out", str(out), "--url", srv.base_url, "-q")
        proc = await spawn_cli(*args)
        await wait_for_rows(out, 100, proc)
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
        checkpointed = set(read_output(out))  # what a crash leaves (a torn line ignored)
        assert 100 <= len(checkpointed) < 200
        sent_before = sum(srv.counts.values())
        rc, stdout, _ = await cli(*args)
        assert rc == 0, stdout
    final = lines_of(out)
    assert sorted(x["custom_id"] for x in final) == sorted(ids)  # every row exactly once
    assert all(x["error"] is None and x["response"]["status_code"] == 200 for x in final)
    assert all(srv.counts[c] == 1 for c in checkpointed)  # never sent again
    assert set(srv.counts) == set(ids)
    # Only rows that were in flight at the kill could be sent twice.
    assert sum(srv.counts.values()) - len(ids) <= sent_before - len(checkpointed)


async def test_ctrl_c_leaves_a_consistent_file_and_rerun_completes(
    tmp_path: Path,
    write_input: Callable[..., list[str]],
    counting_server: Any,
    spawn_cli: Callable[..., Awaitable[asyncio.subprocess.Process]],
    cli: Cli,
) -> None:
    ids = write_input(tmp_path / "in.jsonl", 60)
    out = tmp_path / "out.jsonl"
    async with counting_server(FakeConfig(ttft=0.3, tokens=4)).running() as srv:
        args = (
            "batch",
            str(tmp_path / "in.jsonl"),
            "--out",
            str(out),
            "--url",
            srv.base_url,
            "-q",
            "--concurrency",
            "4",
            "--grace",
            "5",
        )
        proc = await spawn_cli(*args)
        await wait_for_rows(out, 8, proc)
        proc.send_signal(signal.SIGINT)
        stdout, _ = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 130
        assert "interrupted" in stdout.decode()
        first = lines_of(out)  # every line parses: no torn line after Ctrl-C
        done_first = {x["custom_id"] for x in first}
        assert len(done_first) == len(first) < 60
        # The grace period let rows in flight finish: none was cut off and lost.
        assert sum(srv.counts.values()) == len(done_first)
        rc, _, _ = await cli(*args)
        assert rc == 0
    assert sorted(x["custom_id"] for x in lines_of(out)) == sorted(ids)
    assert all(srv.counts[c] == 1 for c in ids)


async def test_failed_rows_are_typed_and_retry_failed_replaces_them(
    tmp_path: Path,
    write_input: Callable[..., list[str]],
    counting_server: Any,
    cli: Cli,
) -> None:
    ids = write_input(tmp_path / "in.jsonl", 20)
    out = tmp_path / "out.jsonl"
    # Sequential: 3 rows get 400 (never retried), then one row gets 429 with no
    # attempt left (max-attempts 1).
    script: list[Any] = ["400", "400", "400", "429"]
    async with counting_server(FakeConfig(tokens=4, script=script)).running() as srv:
        base = (
            "batch",
            str(tmp_path / "in.jsonl"),
            "--out",
            str(out),
            "--url",
            srv.base_url,
            "-q",
            "--concurrency",
            "1",
            "--max-attempts",
            "1",
        )
        rc, stdout, _ = await cli(*base)
        assert rc == 1, stdout  # some rows failed
        first = {x["custom_id"]: x for x in lines_of(out)}
        failed = {c: x["error"]["code"] for c, x in first.items() if x["error"]}
        assert sorted(failed.values()) == ["BadRequest"] * 3 + ["RateLimited"]
        assert all(first[c]["response"]["status_code"] in (400, 429) for c in failed)
        assert len(first) == 20
        before = srv.counts.copy()
        rc, stdout, _ = await cli(*base, "--retry-failed")
        assert rc == 0, stdout
    final = lines_of(out)
    assert sorted(x["custom_id"] for x in final) == sorted(ids)  # compacted: once each
    assert all(x["error"] is None for x in final)
    resent = srv.counts - before
    assert set(resent) == set(failed)  # only the failed rows ran again


async def test_stop_with_no_grace_cancels_in_flight_rows_and_writes_none_of_them(
    tmp_path: Path,
    write_input: Callable[..., list[str]],
    counting_server: Any,
) -> None:
    from infersight.batch import BatchConfig, run_batch_async
    from infersight.batch.progress import BatchProgress

    ids = write_input(tmp_path / "in.jsonl", 12)
    out = tmp_path / "out.jsonl"
    async with counting_server(FakeConfig(ttft=0.3, tokens=2)).running() as srv:
        cfg = BatchConfig(input=tmp_path / "in.jsonl", output=out, url=srv.base_url, concurrency=4)
        loop = asyncio.get_running_loop()
        runners: list[Any] = []

        class StopAfterFour(BatchProgress):
            # Once 4 rows are done, the next 4 go out at once; stop (no grace) while
            # they are in flight (each takes 0.3 s).
            def update(self, *, done: int, **_: int) -> None:
                if done >= 4 and len(runners) == 1:
                    runners.append(loop.call_later(0.1, runners[0].request_stop, 0.0))

        s = await run_batch_async(cfg, progress=StopAfterFour(), on_runner=runners.append)
        assert s.stopped == "interrupted" and s.partial
        assert s.done == 4 and s.not_run == 8
        assert sum(srv.counts.values()) == 8  # 4 more were sent, then cancelled
        assert set(read_output(out)) == {x["custom_id"] for x in lines_of(out)}
        assert len(lines_of(out)) == 4
        s = await run_batch_async(cfg)
        assert s.done == 8 and s.already_done == 4
    assert sorted(x["custom_id"] for x in lines_of(out)) == sorted(ids)
