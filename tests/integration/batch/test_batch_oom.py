"""An engine out of memory makes `batch` back off, as a 503 does, and retry the rows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from infersight.batch import BatchConfig, read_output, run_batch_async
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI


async def test_oom_backs_off_and_the_rows_are_retried(
    tmp_path: Path, write_input: Callable[..., list[str]]
) -> None:
    ids = write_input(tmp_path / "in.jsonl", 40)
    # The first three answers are llama.cpp's "KV cache full" (a 500 on the wire).
    cfg = FakeConfig(ttft=0.02, tokens=2, script=["oom:llamacpp"] * 3)
    async with FakeOpenAI(cfg).running() as srv:
        summary = await run_batch_async(
            BatchConfig(
                input=tmp_path / "in.jsonl", output=tmp_path / "out.jsonl", url=srv.base_url
            )
        )
    assert summary.stopped == "completed" and summary.done == 40 and summary.failed == 0
    assert set(read_output(tmp_path / "out.jsonl")) == set(ids)
    assert summary.errors_by_kind.get("OutOfMemory") == 3
    assert any(
        "OutOfMemory" in d["reason"] and "back off" in d["reason"] for d in summary.decisions
    ), summary.decisions
