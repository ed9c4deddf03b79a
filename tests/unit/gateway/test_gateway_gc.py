"""The serving process keeps the cyclic garbage collector off its hot path."""

from __future__ import annotations

import gc

from infersight.gateway import runner


class Cycle:
    def __init__(self) -> None:
        self.me = self


def test_start_up_heap_is_frozen_and_cycles_are_still_collected() -> None:
    saved = gc.get_threshold()
    try:
        runner._tune_gc()
        assert gc.get_threshold() == runner.GC_THRESHOLD
        assert gc.get_freeze_count() > 1000  # the imported modules, config, app...
        before = gc.get_count()[0]
        alive = [Cycle() for _ in range(100)]  # short-lived garbage in cycles
        del alive
        assert gc.get_count()[0] >= before  # young objects wait for the next collection
        assert gc.collect() >= 100  # ...which still frees reference cycles
    finally:
        gc.unfreeze()
        gc.set_threshold(*saved)
