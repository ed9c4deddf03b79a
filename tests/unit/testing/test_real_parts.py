"""The shared real-parts rule of tests/conftest.py: a test that needs a program which
is missing is skipped (and listed) locally, and fails under INFERSIGHT_REQUIRE_REAL_PARTS=1."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = (Path(__file__).parents[2] / "conftest.py").read_text()
TESTS = """
import pytest

@pytest.mark.needs("infersight-no-such-program")
def test_needs_a_missing_program():
    assert True

@pytest.mark.needs("sh")
def test_needs_a_present_program():
    assert True
"""


def test_a_missing_real_part_is_skipped_and_listed_locally(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("INFERSIGHT_REQUIRE_REAL_PARTS", raising=False)
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            "*tests skipped because real parts are missing*",
            "infersight-no-such-program: 1 test(s), e.g. *test_needs_a_missing_program",
        ]
    )


def test_a_missing_real_part_fails_when_required(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INFERSIGHT_REQUIRE_REAL_PARTS", "1")
    pytester.makeconftest(CONFTEST)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(TESTS)
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*real part missing: infersight-no-such-program*"])
