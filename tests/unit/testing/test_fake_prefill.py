"""The fake server's batched prefill (``FakeConfig.batch_prefill``) on a clock of the
test's own: prompts admitted together share one prefill step and wait for each other's
prompts; one admitted after the gathering window waits for that step, then for its own."""

from __future__ import annotations

import pytest

from infersight_testkit.fake.prefill import PrefillBatches

FIRST, OWN, WINDOW = 0.05, 0.02, 0.01


def test_prompts_admitted_together_wait_for_each_other_and_a_late_one_for_them() -> None:
    now = [100.0]
    batches = PrefillBatches(clock=lambda: now[0])
    group = [batches.admit(first=FIRST, per_prompt=OWN, window=WINDOW) for _ in range(2)]
    now[0] += WINDOW / 2  # within the window: still the same step
    group.append(batches.admit(first=FIRST, per_prompt=OWN, window=WINDOW))
    assert group[0] is group[1] is group[2]
    assert (group[0].start, group[0].end) == pytest.approx((100.0, 100.0 + FIRST + 3 * OWN))
    now[0] += WINDOW  # past the window, while the step runs: the next step, after it
    late = batches.admit(first=FIRST, per_prompt=OWN, window=WINDOW)
    assert late is not group[0]
    assert (late.start, late.end) == pytest.approx((group[0].end, group[0].end + FIRST + OWN))
    now[0] = 200.0  # long after: a step of its own, at once
    alone = batches.admit(first=FIRST, per_prompt=OWN, window=WINDOW)
    assert (alone.start, alone.end) == pytest.approx((200.0, 200.0 + FIRST + OWN))
