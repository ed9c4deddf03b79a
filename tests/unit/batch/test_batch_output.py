"""The output file: format, fsync'ed appends, torn-line repair, last-wins compaction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.batch import OutputWriter, compact_output, load_output, read_output
from infersight.batch.output import result_line
from infersight.core.errors import ConfigError
from support.waiting import until


def ok_line(cid: str, prompt: int = 3, completion: int = 5, model: str = "m") -> bytes:
    body = {
        "model": model,
        "choices": [],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
    }
    return result_line(cid, status=200, body=body, request_id="r-" + cid)


def failed_line(cid: str) -> bytes:
    return result_line(
        cid,
        status=429,
        body={"error": {"message": "slow down"}},
        error_code="RateLimited",
        error_message="HTTP 429",
    )


def test_result_line_is_openai_batch_output() -> None:
    doc = json.loads(ok_line("a"))
    assert set(doc) == {"id", "custom_id", "response", "error"}
    assert doc["id"].startswith("batch_req_") and doc["custom_id"] == "a" and doc["error"] is None
    assert doc["response"]["status_code"] == 200 and doc["response"]["request_id"] == "r-a"
    err = json.loads(
        result_line("b", status=None, body=None, error_code="ConnectError", error_message="refused")
    )
    assert err["response"] is None and err["error"] == {
        "code": "ConnectError",
        "message": "refused",
    }


async def test_writer_appends_whole_lines_with_fsync(tmp_path: Path) -> None:
    p = tmp_path / "out.jsonl"
    w = OutputWriter(p)
    w.add(ok_line("a"))
    w.add(failed_line("b"))
    assert await w.flush() == 2
    assert await w.flush() == 0
    w.add(ok_line("c", 1, 1))
    w.close()
    state = load_output(p)
    assert state.done == {"a": True, "b": False, "c": True}
    assert state.usage == {"m": [4, 6]}
    assert state.ok_ids == {"a", "c"} and state.failed_ids == {"b"}


def test_torn_final_line_is_cut_and_that_row_reruns(tmp_path: Path) -> None:
    p = tmp_path / "out.jsonl"
    whole = ok_line("a") + ok_line("b")
    torn = ok_line("c")[:25]
    p.write_bytes(whole + torn)
    assert set(read_output(p)) == {"a", "b"}  # the reader ignores it, file untouched
    assert p.read_bytes().endswith(torn)
    state = load_output(p)
    assert state.repaired_bytes == len(torn) and set(state.done) == {"a", "b"}
    assert p.read_bytes() == whole


def test_garbage_in_the_middle_is_refused(tmp_path: Path) -> None:
    p = tmp_path / "out.jsonl"
    p.write_bytes(ok_line("a") + b"not json\n" + ok_line("b"))
    with pytest.raises(ConfigError, match="line 2 is not valid JSON"):
        load_output(p)


def test_last_line_wins_and_compaction_keeps_one_line_per_id(tmp_path: Path) -> None:
    p = tmp_path / "out.jsonl"
    p.write_bytes(failed_line("a") + ok_line("b") + failed_line("c") + ok_line("a", 7, 7))
    state = load_output(p)
    assert state.done == {"a": True, "b": True, "c": False} and state.duplicates == 1
    assert state.usage == {"m": [10, 12]}  # a's failed line is superseded
    assert compact_output(p) == 1
    lines = [json.loads(x) for x in p.read_bytes().splitlines()]
    assert [x["custom_id"] for x in lines] == ["b", "c", "a"]
    assert lines[2]["error"] is None
    assert compact_output(p) == 0


@settings(max_examples=60, deadline=None)
@given(
    ops=st.lists(st.tuples(st.sampled_from("abcdefg"), st.booleans()), max_size=40),
    cut=st.integers(min_value=0, max_value=200),
)
def test_compaction_equals_last_wins_reader(
    ops: list[tuple[str, bool]], cut: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    p = tmp_path_factory.mktemp("c") / "out.jsonl"
    data = b"".join(ok_line(c) if ok else failed_line(c) for c, ok in ops)
    torn = ok_line("z")[: cut % 60] if cut % 3 == 0 else b""
    p.write_bytes(data + torn)
    before = {k: v["error"] is None for k, v in read_output(p).items()}
    expect = {}
    for c, ok in ops:
        expect[c] = ok
    assert before == expect
    state = load_output(p)
    compact_output(p)
    after = read_output(p)
    assert {k: v["error"] is None for k, v in after.items()} == expect == state.done
    assert len(p.read_bytes().splitlines()) == len(expect)


async def test_a_cancelled_flush_still_writes_its_rows_before_close(tmp_path: Path) -> None:
    """Regression: cancelling a flush mid-write used to free the lock while the write
    thread still ran, and close() could then lose the rows."""
    import asyncio
    import threading

    p = tmp_path / "out.jsonl"
    w = OutputWriter(p)
    slow = w._write
    # The write runs until the test lets it go: no sleep guesses how long it takes.
    writing, release = threading.Event(), threading.Event()

    def slow_write(data: bytes) -> None:
        writing.set()
        release.wait(20)  # a bound for giving up only
        slow(data)

    w._write = slow_write  # type: ignore[method-assign]
    for i in range(50):
        w.add(ok_line(f"r{i}"))
    task = asyncio.create_task(w.flush())
    await until(writing.is_set, "the write to start")
    task.cancel()
    for _ in range(3):  # let the cancellation reach the flush (yields, not a wait)
        await asyncio.sleep(0)
    assert not task.done()  # the cancelled flush waits for its write in flight
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    w.add(ok_line("last"))
    w.close()
    assert len(read_output(p)) == 51


def test_one_run_per_output_file(tmp_path: Path) -> None:
    from infersight.batch.lock import OutputLock

    p = tmp_path / "out.jsonl"
    first = OutputLock(p)
    with pytest.raises(ConfigError, match="another infersight batch is writing"):
        OutputLock(p)
    p.write_bytes(ok_line("a") + ok_line("a"))
    compact_output(p)  # replaces the file: the lock must follow it
    first.relock()
    with pytest.raises(ConfigError, match="another infersight batch"):
        OutputLock(p)
    first.release()
    OutputLock(p).release()
