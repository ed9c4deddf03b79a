"""The diagnosis chooses the knob and the direction (docs/design.md section 8)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infersight.core.curve import CapacityCurve, Recommendation
from infersight.core.errors import ConfigError
from infersight.tune.knobs import SearchSpace, ladder, search_space

ALL = {"slots": (1, 64), "threads": (1, 8), "ctx": (128, 32768)}
BASE = {"slots": 8, "threads": 2, "ctx": 2048}


def rec(
    knob: str | None, direction: str = "up", target: int | None = None, verdict: str = "slot_bound"
) -> Recommendation:
    return Recommendation(
        verdict=verdict,
        knob=knob,
        direction=direction,
        current=8,
        target=target,
        text=f"{verdict}: change {knob}",
    )


def space(
    r: Recommendation | None,
    knobs: dict[str, tuple[int, int]] = ALL,
    curve: CapacityCurve | None = None,
    knob: str | None = None,
    values: list[int] | None = None,
) -> SearchSpace:
    got = search_space(r, curve, BASE, knobs, knob=knob, values=values)
    assert isinstance(got, SearchSpace), got
    return got


def test_slot_bound_searches_slots_toward_the_recommended_number() -> None:
    p = space(rec("slots", "up", 12))
    assert (p.knob, p.direction, p.target) == ("slots", "up", 12)
    assert p.values[p.start] == 8 and p.values[p.guide] == 12 and p.prefer_low
    assert p.values == list(range(1, 25))  # up to twice the target
    down = space(rec("slots", "down", 3))
    assert down.values[down.guide] == 3


def test_no_recommendation_searches_slots_up_first_over_a_wide_range() -> None:
    p = space(None)
    assert (p.knob, p.direction) == ("slots", "both") and p.values[p.guide] == 16
    assert max(p.values) == 32 and "no recommendation" in p.reason


def test_compute_bound_tries_threads_else_fewer_slots_toward_the_knee() -> None:
    r = rec("replicas", "up", 3, verdict="compute_bound")
    p = space(r)
    assert (p.knob, p.direction) == ("threads", "up") and "cannot add replicas" in p.reason
    curve = CapacityCurve(knee=4.0, knee_reached=True)
    slots_only = {"slots": (1, 64)}
    p2 = space(r, knobs=slots_only, curve=curve)
    assert (p2.knob, p2.direction, p2.values[p2.guide]) == ("slots", "down", 4)
    at_knee = search_space(r, CapacityCurve(knee=8.0, knee_reached=True), BASE, slots_only)
    assert isinstance(at_knee, str) and "replicas" in at_knee


def test_kv_bound_shortens_the_context_and_prefers_more_of_it() -> None:
    p = space(rec("context", "down", verdict="kv_bound"))
    assert (p.knob, p.direction) == ("ctx", "down") and not p.prefer_low
    assert p.values[p.start] == 2048 and p.values[p.guide] == 1024
    assert p.values == [128, 256, 512, 1024, 2048]


def test_nothing_to_tune_when_the_diagnosis_holds() -> None:
    for r in (rec(None, "hold", verdict="healthy"), rec("load", "up", verdict="under_loaded")):
        got = search_space(r, None, BASE, ALL)
        assert isinstance(got, str) and got.startswith("nothing to tune")
    assert search_space(None, None, BASE, {}) == "this target has no setting tune can change"


def test_a_knob_the_target_lacks_falls_back_to_slots() -> None:
    p = space(rec("threads", "up", 4, verdict="host_starved"), knobs={"slots": (1, 64)})
    assert p.knob == "slots" and "no threads setting" in p.reason


def test_the_users_knob_and_values_win() -> None:
    p = space(rec("slots", "up", 12), knob="threads", values=[1, 4])
    assert (p.knob, p.values, p.direction) == ("threads", [1, 2, 4], "both")
    same = space(rec("slots", "up", 12), knob="slots", values=[4, 16])
    assert same.values == [4, 8, 16] and same.values[same.guide] == 16  # target 12 not offered
    with pytest.raises(ConfigError, match="--knob threads: this target can change slots"):
        search_space(None, None, BASE, {"slots": (1, 64)}, knob="threads")


def test_a_target_outside_the_range_is_capped_and_said() -> None:
    p = space(rec("slots", "up", 500))
    assert p.target == 64 and "capped" in p.reason and p.values[-1] == 64


@given(
    st.integers(1, 4096),
    st.one_of(st.none(), st.integers(1, 4096)),
    st.sampled_from(["slots", "threads"]),
)
def test_ladders_are_short_sorted_and_hold_the_current_value_and_the_target(
    current: int,
    target: int | None,
    knob: str,
) -> None:
    vals = ladder(knob, current, target, (1, 4096))
    assert vals == sorted(set(vals)) and vals[0] >= 1 and vals[-1] <= 4096
    assert current in vals and (target is None or target in vals)
    assert len(vals) <= 34
