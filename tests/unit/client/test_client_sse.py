"""SSEParser: framing, fields, content facts, and Hypothesis split/garbage properties."""

from __future__ import annotations

import contextlib
import itertools

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.client import SSEEvent, SSEParser
from infersight.core.errors import MalformedStream


def parse_all(chunks: list[bytes]) -> list[SSEEvent]:
    p = SSEParser()
    out: list[SSEEvent] = []
    for c in chunks:
        out.extend(p.feed(c))
    out.extend(p.close())
    return out


def key(ev: SSEEvent) -> tuple[object, ...]:
    return (
        ev.data,
        ev.event,
        ev.id,
        ev.retry,
        ev.done,
        ev.json,
        ev.has_content,
        ev.n_tokens,
        ev.text,
        ev.finish_reason,
        ev.usage,
        ev.error,
    )


def chunk(text: str, finish: str | None = None) -> dict[str, object]:
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}],
    }


def test_chat_stream_facts() -> None:
    body = (
        b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
        + b"data: "
        + orjson.dumps(chunk("Hel"))
        + b"\n\n"
        + b": keep-alive\n\n"
        + b"data: "
        + orjson.dumps(chunk("lo"))
        + b"\n\n"
        + b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
        + b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n'
        + b"data: [DONE]\n\n"
    )
    evs = parse_all([body])
    assert [e.has_content for e in evs] == [False, True, True, False, False, False]
    assert "".join(e.text for e in evs) == "Hello"
    assert evs[3].finish_reason == "stop"
    assert evs[4].usage == {"prompt_tokens": 3, "completion_tokens": 2}
    assert evs[5].done and evs[5].json is None
    # raw is the exact bytes of each event; comments between events are not events
    assert b"".join(e.raw for e in evs) == body.replace(b": keep-alive\n\n", b"")


def test_fields_multiline_and_line_endings() -> None:
    for eol in (b"\n", b"\r\n", b"\r"):
        body = (
            b"event: update"
            + eol
            + b"id: 7"
            + eol
            + b"retry: 1500"
            + eol
            + b'data: {"a":'
            + eol
            + b"data: 1}"
            + eol
            + b":comment"
            + eol
            + eol
        )
        (ev,) = parse_all([body])
        assert ev.event == "update" and ev.id == "7" and ev.retry == 1500
        assert ev.data == b'{"a":\n1}' and ev.json == {"a": 1}


def test_completions_text_tool_calls_and_logprob_tokens() -> None:
    evs = parse_all(
        [
            b'data: {"choices":[{"index":0,"text":"ab","finish_reason":null}]}\n\n',
            b"data: "
            b'{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"name":"f"}}]}}]}\n\n',
            b'data: {"choices":[{"delta":{"content":"xy"},"logprobs":{"content":[{},{},{}]}}]}\n\n',
            b'data: {"choices":[{"delta":{"reasoning_content":"hmm"}}]}\n\n',
        ]
    )
    assert [e.has_content for e in evs] == [True, True, True, True]
    assert evs[0].text == "ab" and evs[1].tool_calls and evs[2].n_tokens == 3
    assert evs[3].text == "" and evs[3].n_tokens == 1


def test_error_events() -> None:
    evs = parse_all(
        [
            b'data: {"error":{"message":"boom","code":503}}\n\n',
            b"event: error\ndata: upstream died\n\n",
        ]
    )
    assert evs[0].error == {"message": "boom", "code": 503}
    assert evs[1].error == {"message": "upstream died"}


def test_close_keeps_valid_tail_drops_cut_tail() -> None:
    p = SSEParser()
    assert p.feed(b"data: [DONE]") == []
    assert [e.done for e in p.close()] == [True]
    p = SSEParser()
    assert p.feed(b'data: {"choices": [{"delta": {"con') == []
    assert p.close() == []  # a cut stream, not a malformed one


@pytest.mark.parametrize(
    "bad",
    [
        b"data: {not json}\n\n",
        b"data: [1, 2]\n\n",
        b"data: \xff\xfe\n\n",
        b"event: \xff\ndata: {}\n\n",
    ],
)
def test_garbage_is_malformed(bad: bytes) -> None:
    with pytest.raises(MalformedStream):
        parse_all([bad])


# -- Hypothesis ----------------------------------------------------------------------

texts = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)
events = st.one_of(
    texts.map(lambda t: orjson.dumps(chunk(t))),
    st.just(b'{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}'),
    st.just(b"[DONE]"),
    st.dictionaries(st.text(max_size=5), st.integers(-(2**40), 2**40), max_size=3).map(
        orjson.dumps
    ),
)


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, bool]:
    eol = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
    out = b""
    for payload in draw(st.lists(events, max_size=8)):
        if draw(st.booleans()):
            out += b": ping" + eol + eol
        if draw(st.booleans()):
            out += b"event: message" + eol + b"id: 42" + eol
        out += b"data: " + payload + eol + eol
    return out, eol == b"\n"


@st.composite
def splits(draw: st.DrawFn, data: bytes) -> list[bytes]:
    cuts = sorted(draw(st.lists(st.integers(0, len(data)), max_size=12)))
    bounds = [0, *cuts, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_any_split_gives_same_events(data: st.DataObject) -> None:
    body, lf_only = data.draw(streams())
    whole = parse_all([body])
    parts = data.draw(splits(body))
    split = parse_all(parts)
    assert [key(e) for e in split] == [key(e) for e in whole]
    if lf_only:  # with CRLF split across reads the LF may land after dispatch
        assert [e.raw for e in split] == [e.raw for e in whole]
    one_by_one = parse_all([body[i : i + 1] for i in range(len(body))])
    assert [key(e) for e in one_by_one] == [key(e) for e in whole]


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=200), st.lists(st.integers(1, 50), max_size=6))
def test_garbage_only_raises_malformed(blob: bytes, sizes: list[int]) -> None:
    p = SSEParser()
    pos = 0
    try:
        for n in [*sizes, len(blob)]:
            p.feed(blob[pos : pos + n])
            pos += n
        p.close()
    except MalformedStream:
        pass


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                b"data: ",
                b"data:",
                b"\n",
                b"\r",
                b"{",
                b"}",
                b"[DONE]",
                b'"x"',
                b":",
                b"event: error",
                b"\xff",
                b"id: \x00",
                b"retry: 9",
            ]
        ),
        max_size=30,
    )
)
def test_sse_shaped_garbage_only_raises_malformed(pieces: list[bytes]) -> None:
    with contextlib.suppress(MalformedStream):
        parse_all(pieces)
