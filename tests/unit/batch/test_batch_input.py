"""Parsing and validating batch input lines."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.batch import BadInput, parse_line, scan_input
from infersight.batch.input import RowDefaults, iter_rows
from infersight.core.errors import ConfigError, InvalidRequest
from infersight.gateway.request_body import validate


def openai_line(cid: str, content: str = "hi", url: str = "/v1/chat/completions") -> str:
    body: dict[str, object] = {"model": "m", "messages": [{"role": "user", "content": content}]}
    if url == "/v1/completions":
        body = {"model": "m", "prompt": content}
    return json.dumps({"custom_id": cid, "method": "POST", "url": url, "body": body})


def test_openai_batch_line() -> None:
    row = parse_line(openai_line("a-1").encode(), 1)
    assert row is not None
    assert (row.custom_id, row.url, row.body["model"]) == ("a-1", "/v1/chat/completions", "m")
    row = parse_line(openai_line("c", "abc", "/v1/completions").encode(), 7)
    assert row is not None and row.body["prompt"] == "abc" and row.line == 7


def test_plain_forms_get_line_number_ids_and_defaults() -> None:
    d = RowDefaults(model="dflt", max_tokens=9)
    s = parse_line(b'"tell me a joke"\n', 3, d)
    assert s is not None and s.custom_id == "line-3"
    assert s.body == {
        "messages": [{"role": "user", "content": "tell me a joke"}],
        "model": "dflt",
        "max_tokens": 9,
    }
    msgs = parse_line(
        b'[{"role": "system", "content": "x"}, {"role": "user", "content": "y"}]', 4, d
    )
    assert msgs is not None and len(msgs.body["messages"]) == 2 and msgs.custom_id == "line-4"
    raw = parse_line(b"just some text, not JSON\n", 5, d)
    assert raw is not None and raw.body["messages"][0]["content"] == "just some text, not JSON"
    obj = parse_line(b'{"prompt": "p", "max_tokens": 2}', 6, d)
    assert obj is not None and obj.url == "/v1/completions" and obj.body["max_tokens"] == 2
    assert parse_line(b"   \n", 8) is None


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b'{"custom_id": "x", "method": "POST", "url": "/v1/chat/completions"}', "'body'"),
        (b'{"custom_id": "", "url": "/v1/chat/completions", "body": {}}', "custom_id"),
        (
            b'{"custom_id": "x", "method": "GET", "url": "/v1/chat/completions", "body": {}}',
            "method",
        ),
        (b'{"custom_id": "x", "url": "/v1/images", "body": {}}', "url"),
        (
            b'{"custom_id": "x", "url": "/v1/chat/completions", "body": {"messages": []}}',
            "messages",
        ),
        (
            b'{"custom_id": "x", "url": "/v1/chat/completions", "body": {"messages": [{"content": '
            b'"a"}]}}',
            "role",
        ),
        (
            b'{"custom_id": "x", "url": "/v1/chat/completions", "body": {"stream": true, '
            b'"messages": [{"role": "user", "content": "a"}]}}',
            "stream",
        ),
        (
            b'{"custom_id": "x", "url": "/v1/completions", "body": {"prompt": "a", "max_tokens": '
            b"0}}",
            "max_tokens",
        ),
        (
            b'{"custom_id": "x", "url": "/v1/chat/completions", "body": {"messages": [{"role": '
            b'"user", "content": "a"}], "max_tokens": -5}}',
            "max_tokens",
        ),
        (
            b'{"messages": [{"role": "user", "content": "a"}], "max_completion_tokens": -1}',
            "max_completion_tokens",
        ),
        (b'{"messages": [{"role": "user", "content": "a"}], "max_tokens": "12"}', "max_tokens"),
        (b'{"custom_id": "x", "url": "/v1/embeddings", "body": {}}', "input"),
        (b'{"custom_id": "x", "url": "/v1/chat', "does not parse"),
        (b"\xff\xfe", "UTF-8"),
        (b"42", "expected"),
        (b'{"foo": 1}', "neither"),
        (b"[1, 2]", "messages"),
    ],
)
def test_bad_lines_say_why(line: bytes, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason):
        parse_line(line, 1)


def test_scan_reports_line_numbers_and_duplicates(tmp_path: Path) -> None:
    p = tmp_path / "in.jsonl"
    lines = [openai_line("a"), "", "{broken", openai_line("b"), openai_line("a"), '"plain"']
    p.write_text("\n".join(lines) + "\n")
    scan = scan_input(p)
    assert scan.rows == 3
    assert [(b.line, "duplicates line 1" in b.reason) for b in scan.bad] == [(3, False), (5, True)]
    assert scan.ids == {"a", "b", "line-6"}
    rows = list(iter_rows(p, skip_lines=scan.bad_line_numbers))
    assert [(r.custom_id, r.line) for r in rows] == [("a", 1), ("b", 4), ("line-6", 6)]
    err = BadInput(p, scan.bad)
    assert "2 bad lines" in str(err) and "line 3" in str(err) and "line 5" in str(err)
    assert "--on-bad-line skip" in str(err)


def test_missing_input_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such input file"):
        scan_input(tmp_path / "nope.jsonl")


ids = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=1,
    max_size=40,
).filter(lambda s: s.strip() != "")


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(st.tuples(ids, st.text(max_size=200)), max_size=30))
def test_round_trip_any_ids_and_prompts(
    rows: list[tuple[str, str]], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Every distinct id comes back once, in order; later repeats are bad lines."""
    p = tmp_path_factory.mktemp("rt") / "in.jsonl"
    p.write_text("\n".join(openai_line(c, t) for c, t in rows) + "\n", encoding="utf-8")
    scan = scan_input(p)
    seen: list[str] = []
    for c, _ in rows:
        if c not in seen:
            seen.append(c)
    assert scan.rows == len(seen) and len(scan.bad) == len(rows) - len(seen)
    got = list(iter_rows(p, skip_lines=scan.bad_line_numbers))
    assert [r.custom_id for r in got] == seen
    for r in got:
        idx = next(i for i, (c, _) in enumerate(rows) if c == r.custom_id)
        assert r.body["messages"][0]["content"] == rows[idx][1]


@settings(max_examples=150, deadline=None)
@given(
    raw=st.one_of(
        st.binary(max_size=200),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.text(max_size=20),
            lambda children: (
                st.lists(children, max_size=4)
                | st.dictionaries(st.text(max_size=10), children, max_size=4)
            ),
            max_leaves=10,
        ).map(lambda v: json.dumps(v).encode()),
    )
)
def test_parse_line_only_raises_config_error(raw: bytes) -> None:
    with contextlib.suppress(ConfigError):
        parse_line(raw, 1)


def test_bad_lines_get_ids_that_no_valid_row_holds(tmp_path: Path) -> None:
    p = tmp_path / "in.jsonl"
    bad_own = '{"custom_id": "mine", "url": "/v1/chat/completions", "body": {"messages": []}}'
    lines = [openai_line("a"), bad_own, openai_line("a"), "{broken", bad_own, openai_line("line-4")]
    p.write_text("\n".join(lines) + "\n")
    scan = scan_input(p)
    ids = {b.line: b.custom_id for b in scan.bad}
    # its own id when usable; a duplicate's id is the valid row's; line-N is taken here
    assert ids == {2: "mine", 3: "line-3", 4: "line-4-invalid", 5: "line-5"}
    assert not scan.bad_ids & scan.ids


@pytest.mark.parametrize(
    "body",
    [
        {
            "messages": [{"role": "user", "content": "a"}],
            "tools": [{"type": "function", "function": {}}],
        },
        {"messages": [{"role": "user", "content": [{"type": "text"}]}]},
        {"messages": [{"role": "user", "content": "a", "name": 5}]},
        {"messages": [{"role": "user", "content": "a"}], "stream_options": []},
        {"messages": [{"role": "user", "content": "a"}], "n": 0},
        {"prompt": [[1, "x"]]},
    ],
)
def test_a_row_is_refused_as_the_gateway_refuses_its_body(body: dict[str, Any]) -> None:
    endpoint = "chat" if "messages" in body else "completions"
    with pytest.raises(InvalidRequest) as gateway:
        validate(endpoint, {"model": "m", **body})
    with pytest.raises(ConfigError) as batch:
        parse_line(orjson.dumps(body), 1)
    assert str(batch.value) == gateway.value.message  # one owner, one message
