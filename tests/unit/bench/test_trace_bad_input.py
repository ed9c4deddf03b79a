"""Every bad trace is one clear line before anything starts: unusable lines named by
number (or skipped and counted with --on-bad-line skip), an empty trace, a window
that selects nothing, options that cannot go together."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from infersight.bench import BenchConfig
from infersight.bench.replay.check import check_trace, parse_window
from infersight.core.errors import ConfigError

GOOD = {"timestamp": 0, "input_length": 10, "output_length": 5}


def _jsonl(tmp_path: Path, rows: list[object], name: str = "t.jsonl") -> str:
    p = tmp_path / name
    p.write_text(
        "".join((r if isinstance(r, str) else orjson.dumps(r).decode()) + "\n" for r in rows)
    )
    return str(p)


@pytest.mark.parametrize(
    ("row", "why"),
    [
        ({"timestamp": -5, "input_length": 10, "output_length": 5}, "timestamp is negative"),
        ({"timestamp": 10, "output_length": 5}, "input_length is missing"),
        ({"timestamp": 10, "input_length": 10}, "output_length is missing"),
        ({"timestamp": 10, "input_length": 0, "output_length": 5}, "input_length is 0"),
        ({"timestamp": 10, "input_length": 2.5, "output_length": 5}, "input_length is 2.5"),
        ({"timestamp": "soon", "input_length": 10, "output_length": 5}, "not a number"),
        (
            {"timestamp": 10, "input_length": 10, "output_length": 5, "hash_ids": "x"},
            "hash_ids must be a list",
        ),
        ({"input_length": 10, "output_length": 5}, "timestamp is missing"),
        ('{"timestamp": 10, "input_len', "invalid JSON"),
        ("[1, 2]", "not a JSON object"),
    ],
)
def test_mooncake_bad_line_is_named_or_skipped(tmp_path: Path, row: object, why: str) -> None:
    path = _jsonl(tmp_path, [GOOD, {**GOOD, "timestamp": 5}, row, {**GOOD, "timestamp": 20}])
    with pytest.raises(ConfigError) as e:
        check_trace(path)
    msg = str(e.value)
    assert msg.startswith(f"--trace {path}: 1 unusable line: line 3: ")
    assert why in msg and msg.endswith("fix them, or give --on-bad-line skip")
    assert "\n" not in msg
    s = check_trace(path, on_bad_line="skip")
    assert (s.requests, s.bad) == (3, 1) and s.bad_shown[0].startswith("line 3: ")


def test_time_going_back_is_named_in_an_ordered_format(tmp_path: Path) -> None:
    rows = [{**GOOD, "timestamp": t} for t in (0, 100, 50, 200, 150, 300, 10, 400)]
    path = _jsonl(tmp_path, rows)
    with pytest.raises(ConfigError) as e:
        check_trace(path)
    msg = str(e.value)
    assert ": 3 unusable lines: line 3: time 0.05 s is before the previous request's 0.1 s" in msg
    assert "line 5:" in msg and "line 7:" in msg and "(and" not in msg
    s = check_trace(path, on_bad_line="skip")
    assert s.requests == 5 and list(s.times) == [0.0, 0.1, 0.2, 0.3, 0.4]


def test_many_bad_lines_show_three_and_count_the_rest(tmp_path: Path) -> None:
    rows: list[object] = [GOOD] + ["garbage"] * 10
    with pytest.raises(
        ConfigError, match=r"10 unusable lines: line 2: .*line 4: [^;]*\(and 7 more\)"
    ):
        check_trace(_jsonl(tmp_path, rows))


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (
            "timestamp,input_tokens,output_tokens\n0,10,5\n-1,10,5\n",
            "line 3: timestamp is negative",
        ),
        ("timestamp,input_tokens,output_tokens\n0,10,5\n1,,5\n", "line 3: input_tokens is missing"),
        ("0,10,5\n1,ten,5\n", "line 2: input_tokens is 'ten', not a number"),
        ("0,10,5\n2,10,5\n1,10,5\n", "line 3: time 1 s is before the previous request's 2 s"),
        ("timestamp,prompt\n0,10\n", "line 1: a CSV header needs timestamp, input_tokens and"),
    ],
)
def test_plain_csv_bad_lines(tmp_path: Path, text: str, why: str) -> None:
    p = tmp_path / "t.csv"
    p.write_text(text)
    with pytest.raises(ConfigError, match="unusable line") as e:
        check_trace(str(p))
    assert why in str(e.value)


def test_burstgpt_needs_its_header_and_counts_failed_rows(tmp_path: Path) -> None:
    p = tmp_path / "b.csv"
    p.write_text(
        "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
        "1,ChatGPT,10,0,10,Conversation log\n2,ChatGPT,10,0,10,Conversation log\n"
    )
    with pytest.raises(ConfigError) as e:
        check_trace(str(p))
    assert str(e.value) == (
        f"--trace {p}: no request to replay (2 failed in the original (0 response tokens))"
    )


def test_empty_and_unreadable_traces(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n  \n")
    with pytest.raises(ConfigError, match=r"the file is empty: no request to replay$"):
        check_trace(str(empty))
    with pytest.raises(ConfigError, match=r"missing.jsonl: cannot read \(no such file\)"):
        check_trace(str(tmp_path / "missing.jsonl"))
    with pytest.raises(ConfigError, match="not a file"):
        check_trace(str(tmp_path))
    odd = tmp_path / "odd.txt"
    odd.write_text("hello world\n")
    with pytest.raises(ConfigError, match=r"cannot tell its format.*--trace-format"):
        check_trace(str(odd))
    only_bad = _jsonl(tmp_path, ["nope", "nada"], "bad.jsonl")
    with pytest.raises(ConfigError, match=r"no request to replay \(2 unusable line\(s\) skipped\)"):
        check_trace(only_bad, "mooncake", "skip")


def test_access_log_out_of_the_gateway_s_order_is_named(tmp_path: Path) -> None:
    def line(arrival: float, lat: float) -> dict[str, object]:
        return {
            "v": 1,
            "ts": arrival + lat,
            "arrival_ts": arrival,
            "request_id": "r",
            "endpoint": "chat",
            "status": 200,
            "latency_ms": lat * 1000,
            "prompt_tokens": 5,
            "completion_tokens": 2,
        }

    # two logs pasted one after the other: the second goes back in time
    path = _jsonl(tmp_path, [line(100, 0.1), line(101, 0.1), line(50, 0.1), line(102, 0.1)])
    with pytest.raises(ConfigError, match="line 3: ends before an earlier line's request"):
        check_trace(path)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("10m-20m", (600.0, 1200.0)),
        ("90s-", (90.0, None)),
        ("-5m", (0.0, 300.0)),
        ("0-1.5", (0.0, 1.5)),
        (None, (0.0, None)),
    ],
)
def test_window_syntax(text: str | None, want: tuple[float, float | None]) -> None:
    assert parse_window(text) == want


@pytest.mark.parametrize("text", ["10m", "20m-10m", "5s-5s", "a-b", "-"])
def test_bad_windows(text: str) -> None:
    if text == "-":
        assert parse_window(text) == (0.0, None)
        return
    with pytest.raises(ConfigError, match="--window"):
        parse_window(text)


def _cfg(**kw: object) -> BenchConfig:
    return BenchConfig.build(url="http://127.0.0.1:9", progress=False, **kw)


def test_a_window_that_selects_nothing_is_one_line(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, [{**GOOD, "timestamp": t} for t in (0, 1000, 2000)])
    with pytest.raises(ConfigError) as e:
        _cfg(trace=path, trace_window="10s-20s")
    assert str(e.value) == (
        "--window 10s-20s: selects no request; the trace's 3 requests span 0s-2s from its first"
    )
    assert _cfg(trace=path, trace_window="1s-").trace == path


def test_options_that_do_not_go_with_a_trace(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, [GOOD])
    with pytest.raises(ConfigError, match=r"drop --rate \(scale the times with --speedup"):
        _cfg(trace=path, rate=[2.0])
    with pytest.raises(ConfigError, match="drop --concurrency, --shared-prefix"):
        _cfg(trace=path, concurrency=[2], shared_prefix=10)
    with pytest.raises(ConfigError, match="--speedup values must be > 0"):
        _cfg(trace=path, speedup=[0.0])
    with pytest.raises(ConfigError, match=r"^--speedup, --window only apply with --trace FILE$"):
        _cfg(speedup=[2.0], trace_window="1s-")
    with pytest.raises(ConfigError, match="--turns only apply with --sessions N"):
        _cfg(turns="fixed:3")
    with pytest.raises(ConfigError, match=r"--sessions N runs N conversations .* drop --sweep"):
        _cfg(sessions=3, sweep="auto")
    with pytest.raises(ConfigError, match=r"drop --requests$"):
        _cfg(sessions=3, requests=10)
    with pytest.raises(ConfigError, match=r"drop --input-tokens, --max-tokens \("):
        _cfg(trace=path, input_tokens="fixed:9", max_tokens=3)
    with pytest.raises(ConfigError, match="--think-time 'soon'"):
        _cfg(sessions=3, think_time="soon")
    bad = _jsonl(tmp_path, [GOOD, "x"], "bad.jsonl")
    with pytest.raises(ConfigError, match="line 2: invalid JSON"):
        _cfg(trace=bad)
    assert _cfg(trace=bad, on_bad_line="skip").levels()[0].name == "trace x1"
    assert [lv.name for lv in _cfg(trace=path, speedup=[1.0, 2.5]).levels()] == [
        "trace x1",
        "trace x2.5",
    ]
