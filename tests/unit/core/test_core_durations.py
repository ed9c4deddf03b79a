"""Durations as every time flag takes them: 500ms, 2s, 1.5m, 1h or bare seconds."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.core.durations import UNITS, format_duration, parse_duration
from infersight.core.errors import ConfigError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("2s", 2.0),
        ("1.5m", 90.0),
        ("1h", 3600.0),
        ("250us", 250e-6),
        ("0.25", 0.25),
        ("10", 10.0),
        (" 2 S ", 2.0),
        ("3min", 180.0),
        (7, 7.0),
        (0.5, 0.5),
    ],
)
def test_units_and_bare_seconds(text: str | float, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


def test_bare_unit_can_be_milliseconds() -> None:
    assert parse_duration("500", bare="ms") == pytest.approx(0.5)
    assert parse_duration("2s", bare="ms") == 2.0


@pytest.mark.parametrize("bad", ["", "abc", "5 parsecs", "-1s", "1e999", "nan", "1.2.3s", "ms"])
def test_refuses_with_the_flag_named(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"^--ttft-slo "):
        parse_duration(bad, "--ttft-slo")


@given(st.floats(min_value=0, max_value=1e6, allow_nan=False), st.sampled_from(sorted(UNITS)))
@settings(max_examples=200, deadline=None)
def test_any_value_in_any_unit(value: float, unit: str) -> None:
    text = f"{value!r}{unit}" if "e" not in repr(value) else f"{value:.9f}{unit}"
    assert parse_duration(text) == pytest.approx(float(text[: -len(unit)]) * UNITS[unit])


@given(st.floats(min_value=1e-6, max_value=1e6, allow_nan=False))
@settings(max_examples=200, deadline=None)
def test_format_reads_back(seconds: float) -> None:
    back = parse_duration(format_duration(seconds))
    assert math.isclose(back, seconds, rel_tol=1e-3)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1h30m", 5400.0),
        ("2d", 172800.0),
        ("1w", 604800.0),
        ("2d12h", 216000.0),
        ("1m30s", 90.0),
        ("1s500ms", 1.5),
    ],
)
def test_compound_forms_as_prometheus_writes_them(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["1h30", "h1", "1x2s", "1h 30m"])
def test_broken_compound_forms_are_refused(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_duration(text)


def test_elapsed_reads_like_a_clock_and_words_count() -> None:
    from infersight.core.durations import format_elapsed
    from infersight.core.wording import counted

    assert [format_elapsed(s) for s in (0.4, 45, 725, 11_220, -3)] == [
        "0s",
        "45s",
        "12m05s",
        "3h07m",
        "0s",
    ]
    assert [counted(n, "change") for n in (0, 1, 3, 1200)] == [
        "0 changes",
        "1 change",
        "3 changes",
        "1,200 changes",
    ]
    assert counted(2, "replica") == "2 replicas" and counted(2, "batch", "batches") == "2 batches"
