"""Bad input gives one clear line and a non-zero exit; --max-cost stops on time."""

from __future__ import annotations

import json
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from infersight_testkit.fake.openai import FakeConfig

Cli = Callable[..., Awaitable[tuple[int, str, str]]]


def text_of(path: str | Path) -> str:
    p = Path(path)
    return p.read_text() if p.exists() else ""


def one_error_line(err: str) -> str:
    assert "Traceback" not in err
    lines = [x for x in err.splitlines() if x.startswith("error: ")]
    assert len(lines) == 1, err
    return lines[0]


async def test_bad_lines_are_reported_with_numbers_and_nothing_is_sent(
    tmp_path: Path,
    write_input: Callable[..., list[str]],
    counting_server: Any,
    cli: Cli,
) -> None:
    inp = tmp_path / "in.jsonl"
    write_input(inp, 5)
    rows = inp.read_text().splitlines()
    rows.insert(2, "{not json")
    rows.append(rows[0])  # duplicate custom_id row-0000
    inp.write_text("\n".join(rows) + "\n")
    out = tmp_path / "out.jsonl"
    async with counting_server(FakeConfig(tokens=2)).running() as srv:
        rc, _, err = await cli("batch", str(inp), "--out", str(out), "--url", srv.base_url)
        assert rc == 2
        assert "line 3: looks like JSON but does not parse" in err
        assert "line 7: custom_id 'row-0000' duplicates line 1" in err
        assert "2 bad lines" in one_error_line(err)
        assert not srv.counts and not out.exists()  # validated before sending anything
        rc, stdout, err = await cli(
            "batch",
            str(inp),
            "--out",
            str(out),
            "--url",
            srv.base_url,
            "--on-bad-line",
            "skip",
            "-q",
        )
        assert rc == 0, stdout + err
        assert "skipped line 3" in err and "skipped line 7" in err
        assert "an error line each" in stdout
        assert sum(srv.counts.values()) == 5
        # The output accounts for every input row: 5 answers and 2 error lines, the
        # duplicate's under line-7 (its custom_id belongs to the valid row).
        docs = [json.loads(x) for x in out.read_text().splitlines()]
        assert len(docs) == 7
        errors = {d["custom_id"]: d for d in docs if d["error"] is not None}
        assert sorted(errors) == ["line-3", "line-7"]
        # docs/design.md section 7: a skipped line is a DataError, never sent
        assert all(
            d["error"]["code"] == "DataError" and d["response"] is None for d in errors.values()
        )
        assert "input line 3 skipped: looks like JSON" in errors["line-3"]["error"]["message"]
        assert "duplicates line 1" in errors["line-7"]["error"]["message"]
        # A rerun writes them once only, and sends nothing; a file from before (its
        # skipped lines coded ConfigError) is read the same way.
        out.write_text(out.read_text().replace('"code":"DataError"', '"code":"ConfigError"'))
        rc, stdout, err = await cli(
            "batch",
            str(inp),
            "--out",
            str(out),
            "--url",
            srv.base_url,
            "--on-bad-line",
            "skip",
            "-q",
        )
        assert rc == 0, stdout + err
        assert len(out.read_text().splitlines()) == 7 and sum(srv.counts.values()) == 5
        # The broken line fixed: it runs on the next rerun, and its error line is gone.
        rows[2] = json.dumps(
            {
                "custom_id": "line-3",
                "url": "/v1/chat/completions",
                "body": {"model": "fake", "messages": [{"role": "user", "content": "fixed"}]},
            }
        )
        inp.write_text("\n".join(rows) + "\n")
        rc, stdout, err = await cli(
            "batch",
            str(inp),
            "--out",
            str(out),
            "--url",
            srv.base_url,
            "--on-bad-line",
            "skip",
            "-q",
        )
        assert rc == 0, stdout + err
        assert srv.counts["line-3"] == 1
    last = {d["custom_id"]: d for d in map(json.loads, out.read_text().splitlines())}
    assert len(last) == 7 and last["line-3"]["error"] is None
    assert last["line-3"]["response"]["status_code"] == 200


async def test_missing_file_unreachable_url_bad_flags_and_wrong_key(
    tmp_path: Path,
    write_input: Callable[..., list[str]],
    counting_server: Any,
    cli: Cli,
) -> None:
    inp = tmp_path / "in.jsonl"
    write_input(inp, 3)
    out = str(tmp_path / "out.jsonl")
    rc, _, err = await cli(
        "batch", str(tmp_path / "missing.jsonl"), "--out", out, "--url", "http://127.0.0.1:9"
    )
    assert rc == 2 and "no such input file" in one_error_line(err)
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    rc, _, err = await cli("batch", str(inp), "--out", out, "--url", f"http://127.0.0.1:{port}")
    # the address and the reason, none of aiohttp's "ssl:default [Connect call failed ...]"
    assert (
        rc == 2
        and one_error_line(err) == f"error: cannot connect to 127.0.0.1:{port}: connection refused"
    )
    rc, _, err = await cli("batch", str(inp), "--out", out, "--url", "http://x", "--price-in", "1")
    assert rc == 2 and "--price-out" in one_error_line(err)
    rc, _, err = await cli(
        "batch", str(inp), "--out", out, "--url", "http://x", "--on-bad-line", "maybe"
    )
    assert rc == 2 and "--on-bad-line" in one_error_line(err)
    async with counting_server(FakeConfig(tokens=2, api_key="right-key-123")).running() as srv:
        rc, _, err = await cli(
            "batch",
            str(inp),
            "--out",
            out,
            "--url",
            srv.base_url,
            "--api-key-env",
            "BATCH_TEST_KEY",
            env={"BATCH_TEST_KEY": "wrong-key-456"},
        )
        line = one_error_line(err)
        assert rc == 2 and "401" in line and "wrong-key-456" not in err
        # The fake lists models without a key, so the first rows (up to the starting
        # concurrency) reach it; the run stops at the first 401 and writes none of them.
        assert sum(srv.counts.values()) <= 2
        assert text_of(out) == ""
        rc, _, err = await cli(
            "batch",
            str(inp),
            "--out",
            out,
            "--url",
            srv.base_url,
            "-q",
            "--api-key-env",
            "BATCH_TEST_KEY",
            env={"BATCH_TEST_KEY": "right-key-123"},
        )
        assert rc == 0, err


async def test_max_cost_stops_scheduling_on_time_and_a_rerun_continues(
    tmp_path: Path,
    write_input: Callable[..., list[str]],
    counting_server: Any,
    cli: Cli,
) -> None:
    inp = tmp_path / "in.jsonl"
    write_input(inp, 40, max_tokens=8)
    out = tmp_path / "out.jsonl"
    summary = tmp_path / "summary.json"
    # $1 per output token, input free: every row costs exactly $8.
    async with counting_server(FakeConfig(tokens=16, ttft=0.02)).running() as srv:
        base = (
            "batch",
            str(inp),
            "--out",
            str(out),
            "--url",
            srv.base_url,
            "-q",
            "--price-in",
            "0",
            "--price-out",
            "1000000",
            "--summary-json",
            str(summary),
        )
        rc, stdout, _ = await cli(*base, "--max-cost", "100")
        s = json.loads(summary.read_text())
        assert rc == 1 and s["stopped"] == "budget" and "budget" in stdout
        assert s["cost"] <= 100 and s["done"] == 12 and s["not_run"] == 28  # 12 x $8 = $96
        assert sum(srv.counts.values()) == 12  # nothing sent past the budget
        rc, _, _ = await cli(*base, "--max-cost", "200")
        s = json.loads(summary.read_text())
        # The budget covers the whole output file: $96 earlier + 13 x $8 = $200.
        assert s["cost_total"] == 200 and s["done"] == 13 and s["already_done"] == 12
    assert len(out.read_text().splitlines()) == 25
