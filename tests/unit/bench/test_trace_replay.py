"""Rebuilt prompts share what the trace shares; one schedule however it is split;
the prefix-sharing survey measures the text that is sent (Hypothesis where it is a
property)."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.bench.level.work import FeedItem, LevelWork
from infersight.bench.replay.check import check_trace
from infersight.bench.replay.feed import Overhead, RequestShape, TraceFeed
from infersight.bench.replay.formats import TraceEntry
from infersight.bench.replay.prepare import survey
from infersight.bench.replay.sessions import SessionFeed
from infersight.bench.replay.text import TextBuilder, allot
from infersight.bench.replay.think import ThinkTime

WORDS = tuple(
    [
        "the",
        "of",
        "and",
        "to",
        "in",
        "is",
        "was",
        "for",
        "on",
        "are",
        "as",
        "with",
        "his",
        "they",
        "at",
        "be",
        "this",
        "from",
    ]
)
SHAPE = RequestShape(WORDS, 0, "m", "chat", True, False)


@given(st.integers(0, 5000), st.lists(st.integers(0, 1000), min_size=1, max_size=12))
@settings(max_examples=200, deadline=None)
def test_allot_splits_exactly_and_in_proportion(total: int, weights: list[int]) -> None:
    out = allot(total, weights)
    assert sum(out) == total and all(x >= 0 for x in out)
    wsum = sum(weights)
    nonzero = sum(1 for w in weights if w > 0)
    if wsum and total >= 2 * nonzero:
        assert all(o >= 1 for o, w in zip(out, weights, strict=True) if w > 0)
    if wsum and all(total * w / wsum >= 1 for w in weights if w > 0):
        # no share needed raising to one: each is its exact share, rounded
        for o, w in zip(out, weights, strict=True):
            assert abs(o - total * w / wsum) < 1


@given(
    st.lists(st.integers(0, 20), min_size=1, max_size=5), st.integers(1, 3000), st.integers(1, 3000)
)
@settings(max_examples=100, deadline=None)
def test_shared_hash_ids_give_the_same_leading_text(ids: list[int], n1: int, n2: int) -> None:
    tb = TextBuilder(WORDS, seed=3, block_tokens=64)
    a = tb.mooncake(TraceEntry(1, 0.0, n1, 1, hash_ids=tuple(ids)), own_key=1)
    b = tb.mooncake(TraceEntry(2, 0.0, n2, 1, hash_ids=tuple(ids)), own_key=2)
    assert len(a.split()) == n1 and len(b.split()) == n2
    shared_blocks_tokens = min(n1, n2, 64 * len(ids))
    assert a.split()[:shared_blocks_tokens] == b.split()[:shared_blocks_tokens]
    # a fresh builder (another worker) makes the same text
    assert (
        TextBuilder(WORDS, seed=3, block_tokens=64).mooncake(
            TraceEntry(1, 0.0, n1, 1, hash_ids=tuple(ids)), own_key=1
        )
        == a
    )
    if n1 > 64 * len(ids) and n2 > 64 * len(ids):  # tails are each request's own
        assert a.split()[64 * len(ids) :][:50] != b.split()[64 * len(ids) :][:50]


def test_unshared_prompts_differ_from_the_first_word() -> None:
    tb = TextBuilder(WORDS, seed=0)
    a = tb.mooncake(TraceEntry(1, 0.0, 300, 1), own_key=10)
    b = tb.mooncake(TraceEntry(2, 0.0, 300, 1), own_key=11)
    assert a.split()[:8] != b.split()[:8]


def test_access_log_messages_keep_their_text_wherever_they_recur() -> None:
    tb = TextBuilder(WORDS, seed=0)
    sys_msg = ("system", "aa11", 400)
    e1 = TraceEntry(1, 0.0, 150, 5, prefix=(sys_msg, ("user", "bb22", 100)))
    e2 = TraceEntry(
        2,
        1.0,
        400,
        5,
        prefix=(sys_msg, ("user", "bb22", 100), ("assistant", "cc33", 300), ("user", "dd44", 200)),
    )
    c1 = tb.counts(e1, 150)
    c2 = tb.counts(e2, 400)
    assert sum(c1) == 150 and sum(c2) == 400
    assert c2[:2] == c1  # the recurring messages keep their first counts
    m1, m2 = tb.messages(e1, c1, 1), tb.messages(e2, c2, 2)
    assert m2[:2] == m1 and [m["role"] for m in m2] == ["system", "user", "assistant", "user"]


def _mooncake_file(tmp_path: Path, n: int = 40) -> TraceFeed:
    rows = []
    for i in range(n):
        rows.append(
            {
                "timestamp": i * 7 + (i % 3),
                "input_length": 256 + 10 * (i % 5),
                "output_length": 3 + i % 4,
                "hash_ids": [1, 2] if i % 4 else [1000 + i],
                **({"session_id": f"c{i % 6}"} if i >= n else {}),
            }
        )
    p = tmp_path / "m.jsonl"
    p.write_text("".join(orjson.dumps(r).decode() + "\n" for r in rows))
    s = check_trace(str(p))
    shape = RequestShape(WORDS, 7, "m", "chat", True, False, Overhead(3, 1, True))
    return TraceFeed(str(p), "mooncake", 0.0, s.origin, None, 2.0, shape, block_tokens=128)


def test_split_feeds_are_one_schedule(tmp_path: Path) -> None:
    feed = _mooncake_file(tmp_path)
    whole = list(feed.items())
    shares = [list(f.items()) for f in feed.split(3)]
    got = sorted((it for part in shares for it in part), key=lambda it: it.index)
    assert [it.index for it in got] == [it.index for it in whole] == list(range(40))
    assert [it.offset for it in got] == [it.offset for it in whole]
    assert [it.body for it in got] == [it.body for it in whole]
    assert [it.shared for it in got] == [it.shared for it in whole]
    assert {it.index % 3 for it in shares[1]} == {1}
    assert whole[1].body is not None and whole[1].labels["in"] == str(266 + 3 + 1)


def test_window_requests_and_duration_cut_the_schedule(tmp_path: Path) -> None:
    feed = _mooncake_file(tmp_path)
    cut = dataclasses.replace(feed, start=feed.start + 0.07, end=feed.start + 0.2)
    got = list(cut.entries())
    times = [t / 1000 for t in (i * 7 + i % 3 for i in range(40)) if 70 <= t < 200]
    assert [e.t for _, _, e in got] == times
    assert got[0][1] == 0.0 and abs(got[1][1] - (times[1] - times[0]) / 2) < 1e-12  # speedup 2
    assert len(list(dataclasses.replace(feed, limit=5).entries())) == 5
    assert max(o for _, o, _ in dataclasses.replace(feed, duration=0.05).entries()) < 0.05


def test_survey_measures_the_sharing_of_the_text_sent(tmp_path: Path) -> None:
    feed = _mooncake_file(tmp_path)
    work = LevelWork(name="trace x1", path="/v1/chat/completions", bodies=(), feed=feed)
    out = asyncio.run(survey(work, None))
    assert out["measured_on"] == 40
    # 30 of 40 requests use blocks [1, 2]: all but the first of them repeat 256 tokens
    assert 0.65 < out["intended"] < 0.8
    assert abs(out["sent"] - out["intended"]) < 0.05


def test_conversation_turns_carry_their_history_and_think_time(tmp_path: Path) -> None:
    rows = [
        {"timestamp": 0, "session_id": "a", "input_length": 20, "output_length": 5},
        {"timestamp": 10, "session_id": "b", "input_length": 30, "output_length": 5},
        {"session_id": "a", "delay": 1500, "input_length": 40, "output_length": 5},
        {"timestamp": 20, "session_id": "b", "input_length": 60, "output_length": 5},
    ]
    p = tmp_path / "s.jsonl"
    p.write_text("".join(orjson.dumps(r).decode() + "\n" for r in rows))
    s = check_trace(str(p))
    assert s.sessions == 2
    feed = TraceFeed(str(p), "mooncake", 0.0, s.origin, None, 1.0, SHAPE, sessions=True)
    items: list[FeedItem] = list(feed.items())
    assert [(it.session, it.turn) for it in items] == [("a", 1), ("b", 1), ("a", 2), ("b", 2)]
    a2 = items[2]
    assert a2.think == 1.5 and a2.offset == items[1].offset  # released with the line before
    assert len(a2.new_messages[0]["content"].split()) == 40 - 20 - 5  # what the prompt grew by
    assert a2.shared == 25 and a2.labels["turn"] == "2"
    owners = [{it.session for it in f.items()} for f in feed.split(2)]
    assert owners[0].isdisjoint(owners[1])  # a conversation stays with one worker


def test_synthetic_conversations() -> None:
    feed = SessionFeed(
        3, "fixed:3", "uniform:1s:2s", "fixed:10", None, 4, 20, SHAPE, starts=(0.0, 0.5, 1.0)
    )
    convs = list(feed.conversations())
    assert len(convs) == 3 and all(len(c) == 3 for c in convs)
    first = convs[1][0]
    assert [m["role"] for m in first.new_messages] == ["system", "user"]
    assert first.new_messages[0] == convs[0][0].new_messages[0]  # the shared system prompt
    assert first.offset == 0.5 and first.think is None
    assert all(1.0 <= t.think <= 2.0 for c in convs for t in c[1:] if t.think is not None)
    assert [t.labels["in"] for t in convs[0]] == ["30", "44", "58"]
    assert [t.shared for t in convs[0]] == [0, 34, 48]
    split = [c for f in feed.split(2) for c in f.conversations()]
    assert sorted(c[0].index for c in split) == [c[0].index for c in convs]
    assert ThinkTime.parse("2s").sample(None) == 2.0  # type: ignore[arg-type]


def test_access_log_conversations_think_as_long_as_the_log_shows(tmp_path: Path) -> None:
    def line(arrival: float, lat: float, n_in: int, prefix: list[list[object]]) -> bytes:
        return orjson.dumps(
            {
                "v": 1,
                "ts": arrival + lat,
                "arrival_ts": arrival,
                "request_id": "r",
                "endpoint": "chat",
                "status": 200,
                "latency_ms": lat * 1000,
                "prompt_tokens": n_in,
                "completion_tokens": 4,
                "session": "s-1",
                "prefix": prefix,
            }
        )

    p = tmp_path / "a.jsonl"
    p.write_bytes(
        line(10.0, 0.5, 30, [["system", "aa", 50], ["user", "bb", 10]])
        + b"\n"
        + line(
            14.5,
            0.5,
            50,
            [["system", "aa", 50], ["user", "bb", 10], ["assistant", "cc", 16], ["user", "dd", 40]],
        )
        + b"\n"
    )
    s = check_trace(str(p))
    feed = TraceFeed(str(p), "gateway", s.max_latency, s.origin, None, 2.0, SHAPE, sessions=True)
    one, two = list(feed.items())
    assert [m["role"] for m in one.new_messages] == ["system", "user"]
    assert two.think == pytest.approx((14.5 - 10.5) / 2)  # end of turn 1 to turn 2, at 2x
    assert [m["role"] for m in two.new_messages] == ["user"]
    assert len(two.new_messages[0]["content"].split()) == 50 - 30 - 4  # the new message


def test_an_access_log_without_fingerprints_still_takes_the_template_off(tmp_path: Path) -> None:
    """``access_log_fingerprints = false``: no prefix; the counts include a template."""
    p = tmp_path / "a.jsonl"
    p.write_bytes(
        orjson.dumps(
            {
                "v": 1,
                "ts": 1.5,
                "arrival_ts": 1.0,
                "request_id": "r",
                "endpoint": "chat",
                "status": 200,
                "latency_ms": 500.0,
                "prompt_tokens": 40,
                "completion_tokens": 3,
            }
        )
        + b"\n"
    )
    s = check_trace(str(p))
    shape = RequestShape(WORDS, 0, "m", "chat", True, False, Overhead(6, 4, True))
    (item,) = TraceFeed(str(p), "gateway", s.max_latency, s.origin, None, 1.0, shape).items()
    assert item.body is not None and item.labels["in"] == "40"
    assert len(item.body["messages"][0]["content"].split()) == 40 - 6 - 4


def test_turns_without_a_think_time_in_the_trace_take_think_time(tmp_path: Path) -> None:
    p = tmp_path / "c.csv"
    p.write_text("timestamp,input_tokens,output_tokens,session_id\n0,10,2,a\n1,20,2,a\n")
    s = check_trace(str(p))
    feed = TraceFeed(
        str(p), "csv", 0.0, s.origin, None, 1.0, SHAPE, sessions=True, think="uniform:2s:3s"
    )
    one, two = feed.items()
    assert one.think is None and 2.0 <= (two.think or 0) <= 3.0
    assert [x.think for x in feed.items()] == [one.think, two.think]  # the same each time
