"""Odd custom_ids, plain input lines, embeddings and streamed (SLO) rows, end to end."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from infersight.batch import BatchConfig, read_output, run_batch_async
from infersight_testkit.fake.openai import FakeConfig


async def test_any_custom_id_and_every_input_form(tmp_path: Path, counting_server: Any) -> None:
    inp, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    odd = ["ü/ä 1", "new\nline", "tab\there", "emoji 🚀", "x" * 300]
    lines = [
        json.dumps(
            {
                "custom_id": c,
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {"messages": [{"role": "user", "content": c}]},
            }
        )
        for c in odd
    ]
    lines += [
        '"a plain prompt"',
        '[{"role": "user", "content": "a messages list"}]',
        "raw text that is not JSON",
        json.dumps(
            {
                "custom_id": "emb",
                "method": "POST",
                "url": "/v1/embeddings",
                "body": {"input": ["a", "b"]},
            }
        ),
        json.dumps(
            {
                "custom_id": "cmp",
                "method": "POST",
                "url": "/v1/completions",
                "body": {"prompt": "one two three"},
            }
        ),
    ]
    inp.write_text("\n".join(lines) + "\n")
    async with counting_server(FakeConfig(ttft=0.01, itl=0.001, tokens=4)).running() as srv:
        s = await run_batch_async(
            BatchConfig(input=inp, output=out, url=srv.base_url, max_tokens=3, ttft_slo=1.0)
        )
        assert s.done == 10 and s.failed == 0
        res = read_output(out)
        assert set(res) == {*odd, "line-6", "line-7", "line-8", "emb", "cmp"}
        assert srv.counts == dict.fromkeys(res, 1)  # the header carried each id intact
    chat = res["line-6"]["response"]["body"]
    assert chat["object"] == "chat.completion" and chat["usage"]["completion_tokens"] == 3
    assert chat["choices"][0]["message"]["content"]  # merged from the stream (SLO mode)
    assert len(res["emb"]["response"]["body"]["data"]) == 2
    assert res["cmp"]["response"]["body"]["choices"][0]["text"]
    assert s.completion_tokens == 9 * 3  # embeddings count no output tokens
