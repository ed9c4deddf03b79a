"""Dynamic batcher: flush by size or age, group by length, per-caller outcomes."""

from __future__ import annotations

import asyncio
from collections.abc import Hashable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.gateway.dynamic_batching import DynamicBatcher
from support.waiting import until


class Recorder:
    def __init__(self, fail_item: str | None = None, fail_all: bool = False) -> None:
        self.calls: list[list[str]] = []
        self.fail_item = fail_item
        self.fail_all = fail_all

    async def __call__(self, key: Hashable, items: list[str]) -> list[str | BaseException]:
        self.calls.append(list(items))
        await asyncio.sleep(0)
        if self.fail_all:
            raise RuntimeError("upstream down")
        return [ValueError(i) if i == self.fail_item else f"{key}:{i}" for i in items]


async def test_flush_at_size() -> None:
    rec = Recorder()
    b: DynamicBatcher[str, str] = DynamicBatcher(rec, max_batch_size=4, max_wait=10.0)
    out = await asyncio.wait_for(asyncio.gather(*(b.submit("k", f"x{i}") for i in range(8))), 2.0)
    assert out == [f"k:x{i}" for i in range(8)]
    assert [len(c) for c in rec.calls] == [4, 4]


async def test_flush_at_age() -> None:
    rec = Recorder()
    # max_wait well above a busy machine's stalls: the batch must still be open when the
    # poll below sees both items (at 20 ms a loaded CI flushed it first)
    b: DynamicBatcher[str, str] = DynamicBatcher(rec, max_batch_size=100, max_wait=1.0)
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    both = asyncio.gather(b.submit("k", "a"), b.submit("k", "b"))
    await until(lambda: sum(len(x.items) for x in b._open.values()) == 2, "both items in")
    # 2 of 100 items: not flushed by size; the age timer is due max_wait after the
    # first item, on the loop's clock (read here, never waited on)
    (batch,) = b._open.values()
    assert rec.calls == [] and batch.timer is not None
    assert t0 + 1.0 <= batch.timer.when() <= loop.time() + 1.0
    out = await asyncio.wait_for(both, 20.0)  # a bound for giving up, not the wait
    assert out == ["k:a", "k:b"] and rec.calls == [["a", "b"]]


async def test_keys_and_length_classes_never_mix() -> None:
    rec = Recorder()
    b: DynamicBatcher[str, str] = DynamicBatcher(
        rec, max_batch_size=100, max_wait=0.01, length_ratio=4.0
    )
    await asyncio.gather(
        b.submit("m1", "s1", length=10),
        b.submit("m1", "s2", length=12),
        b.submit("m2", "o1", length=10),
        b.submit("m1", "long", length=1000),
    )
    assert sorted(map(sorted, rec.calls)) == [["long"], ["o1"], ["s1", "s2"]]


async def test_each_caller_gets_its_own_error() -> None:
    rec = Recorder(fail_item="bad")
    b: DynamicBatcher[str, str] = DynamicBatcher(rec, max_batch_size=3, max_wait=1.0)
    res = await asyncio.gather(
        b.submit("k", "a"), b.submit("k", "bad"), b.submit("k", "c"), return_exceptions=True
    )
    assert res[0] == "k:a" and res[2] == "k:c" and isinstance(res[1], ValueError)


async def test_batch_failure_reaches_every_caller() -> None:
    rec = Recorder(fail_all=True)
    b: DynamicBatcher[str, str] = DynamicBatcher(rec, max_batch_size=2, max_wait=1.0)
    res = await asyncio.gather(b.submit("k", "a"), b.submit("k", "b"), return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in res)


async def test_units_count_towards_size() -> None:
    rec = Recorder()
    b: DynamicBatcher[str, str] = DynamicBatcher(rec, max_batch_size=5, max_wait=10.0)
    await asyncio.wait_for(
        asyncio.gather(
            b.submit("k", "a", units=3), b.submit("k", "b", units=3), b.submit("k", "c", units=2)
        ),
        2.0,
    )
    assert rec.calls == [["a"], ["b", "c"]]


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from("ab"), st.integers(1, 3), st.integers(1, 500)),
        min_size=1,
        max_size=30,
    ),
    st.integers(1, 8),
)
def test_every_item_answered_once_batches_bounded(
    items: list[tuple[str, int, int]], size: int
) -> None:
    async def run() -> None:
        seen: list[list[int]] = []

        async def runner(key: Hashable, batch: list[int]) -> list[int | BaseException]:
            seen.append(batch)
            return [i * 10 for i in batch]

        b: DynamicBatcher[int, int] = DynamicBatcher(runner, max_batch_size=size, max_wait=0.001)
        res = await asyncio.gather(
            *(b.submit(k, i, units=min(u, size), length=ln) for i, (k, u, ln) in enumerate(items))
        )
        assert res == [i * 10 for i in range(len(items))]
        assert sorted(x for bt in seen for x in bt) == list(range(len(items)))
        for bt in seen:
            assert sum(min(items[i][1], size) for i in bt) <= max(
                size, max(min(items[i][1], size) for i in bt)
            )

    asyncio.run(run())


def test_length_class_groups_similar_lengths() -> None:
    b: DynamicBatcher[str, str] = DynamicBatcher(Recorder(), length_ratio=4.0)
    assert b.length_class(10) == b.length_class(12)
    assert b.length_class(10) != b.length_class(1000)


@pytest.mark.parametrize("ratio", [1.0])
def test_ratio_one_disables_grouping(ratio: float) -> None:
    b: DynamicBatcher[str, str] = DynamicBatcher(Recorder(), length_ratio=ratio)
    assert b.length_class(1) == b.length_class(10**6) == 0
