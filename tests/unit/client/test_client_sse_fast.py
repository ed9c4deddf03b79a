"""SSEParser fast path (LF-only whole blocks) against the general line walk."""

from __future__ import annotations

import itertools

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.client import SSEEvent, SSEParser
from infersight.core.errors import MalformedStream


def facts(evs: list[SSEEvent]) -> list[tuple[object, ...]]:
    return [
        (
            e.data,
            e.raw,
            e.event,
            e.id,
            e.retry,
            e.done,
            e.json,
            e.has_content,
            e.n_tokens,
            e.text,
            e.finish_reason,
            e.usage,
            e.error,
        )
        for e in evs
    ]


def feed_all(chunks: list[bytes]) -> list[SSEEvent]:
    p = SSEParser()
    out: list[SSEEvent] = []
    for c in chunks:
        out.extend(p.feed(c))
    return out + p.close()


def test_good_events_then_malformed_in_one_read() -> None:
    good = b'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: [DONE]\n\n'
    p = SSEParser()
    evs = p.feed(good + b"data: {oops\n\n" + b'data: {"choices":[]}\n\n')
    assert [e.text for e in evs] == ["a", ""] and evs[1].done
    assert isinstance(p.error, MalformedStream)
    with pytest.raises(MalformedStream):
        p.feed(b"data: {}\n\n")  # the kept error comes first, whatever follows
    with pytest.raises(MalformedStream):
        p.close()
    with pytest.raises(MalformedStream):  # nothing good before it: raised at once
        SSEParser().feed(b"data: {oops\n\n")


BLOCKS = [
    b'data: {"choices":[{"delta":{"content":"x"}}]}\n\n',
    b'data: {"choices":[{"text":"y","finish_reason":"stop"}]}\n\n',
    b"data: [DONE]\n\n",
    b": keep-alive\n\n",
    b"\n",
    b'data: {"a":\ndata: 1}\n\n',
    b'event: message\nid: 7\ndata: {"choices":[]}\n\n',
    b'data:{"choices":[],"usage":{"completion_tokens":2}}\n\n',
    b'event: error\ndata: {"error":{"message":"m"}}\n\n',
    b"retry: 50\ndata: \n\n",
    b'data:  {"choices":[{"delta":{"content":"z"}}]}\n\n',
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(BLOCKS), max_size=12), st.data())
def test_fast_path_equals_line_walk(blocks: list[bytes], data: st.DataObject) -> None:
    body = b"".join(blocks)
    whole = feed_all([body])  # mostly the block fast path
    bytewise = feed_all([body[i : i + 1] for i in range(len(body))])  # always the line walk
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=6)))
    bounds = [0, *cuts, len(body)]
    mixed = feed_all([body[a:b] for a, b in itertools.pairwise(bounds)])
    assert facts(whole) == facts(bytewise) == facts(mixed)
    assert sum(e.has_content for e in whole) == sum(
        b.count(b'"content":"') + b.count(b'"text":"') for b in blocks
    )


def test_fast_path_event_bytes() -> None:
    ev = orjson.dumps({"choices": [{"delta": {"content": "hi"}, "finish_reason": None}]})
    (e,) = SSEParser().feed(b"data: " + ev + b"\n\n")
    assert e.data == ev and e.raw == b"data: " + ev + b"\n\n" and e.text == "hi" and e.n_tokens == 1
