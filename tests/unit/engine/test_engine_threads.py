"""The compute threads' wait policy: GOMP_SPINCOUNT parsing, precedence, start-up text."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infersight.core.errors import ConfigError
from infersight.engine.threads import (
    INFINITE_SPIN,
    SPIN_COUNT,
    describe_wait,
    parse_spin_count,
    resolve_wait,
    wait_env,
)


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(["", "k", "M", "G", "T"]))
def test_spin_counts_parse_like_libgomp(n: int, suffix: str) -> None:
    factor = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}[suffix]
    assert parse_spin_count(f"{n}{suffix}") == min(n * factor, INFINITE_SPIN)


@given(st.text(max_size=12))
def test_anything_else_is_one_config_error_or_a_count(text: str) -> None:
    try:
        n = parse_spin_count(text)
    except ConfigError as e:
        assert "GOMP_SPINCOUNT" in str(e) and "\n" not in str(e)
    else:
        assert 0 <= n <= INFINITE_SPIN


def test_infinite_is_libgomps_active_spin() -> None:
    assert parse_spin_count("INFINITE") == parse_spin_count("infinity") == INFINITE_SPIN


def test_arguments_win_over_the_environment_which_wins_over_the_default() -> None:
    default = resolve_wait(environ={})
    assert (default.policy, default.spin_count, default.source) == ("AUTO", SPIN_COUNT, "default")
    env = {"OMP_WAIT_POLICY": "passive", "GOMP_SPINCOUNT": "2k"}
    w = resolve_wait(environ=env)
    assert (w.policy, w.spin_count) == ("PASSIVE", 2000)
    assert w.source == "$OMP_WAIT_POLICY and $GOMP_SPINCOUNT"
    w = resolve_wait("active", 0, environ=env)
    assert (w.policy, w.spin_count, w.source) == ("ACTIVE", 0, "argument")
    # A policy from the environment keeps its own spin (none is added).
    assert resolve_wait(environ={"OMP_WAIT_POLICY": "ACTIVE"}).spin_count is None


@pytest.mark.parametrize("bad", [-1, True, 1.5])
def test_bad_spin_counts_are_config_errors(bad: object) -> None:
    with pytest.raises(ConfigError, match="spin count"):
        resolve_wait(None, bad, {})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="GOMP_SPINCOUNT"):
        resolve_wait(environ={"GOMP_SPINCOUNT": "lots"})


def test_engine_environment_and_start_up_text() -> None:
    assert wait_env("AUTO", 1000) == {"OMP_WAIT_POLICY": None, "GOMP_SPINCOUNT": "1000"}
    assert wait_env("PASSIVE", None) == {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": None}
    assert describe_wait("AUTO", 1000) == "waiting threads spin 1000 turns, then sleep"
    assert "sleep at once" in describe_wait("PASSIVE", None)
    assert "spin (fastest" in describe_wait("ACTIVE", None)
    assert "spin (fastest" in describe_wait("AUTO", INFINITE_SPIN)
    assert "300000 turns" in describe_wait("AUTO", None)  # libgomp's own default
