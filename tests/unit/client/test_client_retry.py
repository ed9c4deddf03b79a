"""Retry policy pieces: budget, backoff, Retry-After parsing, error mapping."""

from __future__ import annotations

import email.utils
import time

from hypothesis import given
from hypothesis import strategies as st

from infersight.client import RetryBudget, RetryPolicy
from infersight.client.errors_map import error_from_event, extract_message, parse_retry_after
from infersight.core import errors as E


def test_budget_allows_min_then_ratio() -> None:
    b = RetryBudget(ratio=0.2, window=10.0, min_retries=2)
    for _ in range(10):
        b.deposit(100.0)
    # 2 + 0.2 * 10 = 4 retries allowed in the window
    assert [b.withdraw(100.0) for _ in range(6)] == [True] * 4 + [False] * 2
    assert b.refused == 2
    # after the window slides past, the budget is fresh again
    assert b.withdraw(111.0)


@given(st.integers(0, 500), st.floats(0, 1), st.integers(0, 20))
def test_budget_never_exceeds_bound(n_requests: int, ratio: float, min_retries: int) -> None:
    b = RetryBudget(ratio=ratio, window=10.0, min_retries=min_retries)
    for _ in range(n_requests):
        b.deposit(5.0)
    granted = sum(b.withdraw(5.0) for _ in range(n_requests + min_retries + 5))
    assert granted <= min_retries + ratio * n_requests
    assert granted >= int(min_retries + ratio * n_requests) - 1


@given(st.integers(1, 30), st.floats(0.001, 5), st.floats(0.01, 60))
def test_backoff_full_jitter_capped(n: int, base: float, cap: float) -> None:
    p = RetryPolicy(base_delay=base, max_delay=cap)
    d = p.backoff(n)
    assert 0.0 <= d <= min(cap, base * 2 ** (n - 1)) + 1e-12


def test_backoff_is_jittered() -> None:
    p = RetryPolicy(base_delay=1.0, max_delay=100.0)
    assert len({round(p.backoff(4), 6) for _ in range(50)}) > 40


def test_parse_retry_after() -> None:
    assert parse_retry_after({"Retry-After": "1"}) == 1.0
    assert parse_retry_after({"Retry-After": "2.5"}) == 2.5
    assert parse_retry_after({"retry-after-ms": "250", "Retry-After": "9"}) == 0.25
    assert parse_retry_after({"Retry-After": "soon"}) is None
    assert parse_retry_after({"Retry-After": "-3"}) is None
    assert parse_retry_after({}) is None
    now = time.time()
    date = email.utils.formatdate(now + 30, usegmt=True)
    v = parse_retry_after({"Retry-After": date}, now=now)
    assert v is not None and 28 <= v <= 31
    past = email.utils.formatdate(now - 30, usegmt=True)
    assert parse_retry_after({"Retry-After": past}, now=now) == 0.0


def test_extract_message_shapes() -> None:
    assert extract_message(b'{"error": {"message": "bad  model\\n x"}}') == "bad model x"
    assert extract_message(b'{"detail": "Not Found"}') == "Not Found"
    assert extract_message(b'{"error": "plain"}') == "plain"
    assert extract_message(b"<html>oops</html>") == "<html>oops</html>"
    assert len(extract_message(b"x" * 5000)) <= 503


def test_error_event_mapping() -> None:
    assert isinstance(error_from_event({"message": "m", "code": 429}, 200, None), E.RateLimited)
    assert isinstance(error_from_event({"message": "m", "code": "503"}, 200, None), E.Overloaded)
    assert isinstance(
        error_from_event({"message": "m", "type": "TruncatedStream"}, 200, None), E.TruncatedStream
    )
    gw = {"message": "upstream broke", "type": "api_error", "code": "truncated_stream"}
    assert isinstance(error_from_event(gw, 200, None), E.TruncatedStream)
    assert isinstance(error_from_event({"code": "idle_timeout"}, 200, None), E.IdleTimeout)
    assert isinstance(error_from_event({"code": "server_error"}, 200, None), E.ServerError)
    assert isinstance(error_from_event({"type": "overloaded_error"}, 200, None), E.Overloaded)
    e = error_from_event({"message": "key sk-abcdef12 leaked"}, 200, "sk-abcdef12")
    assert isinstance(e, E.ServerError) and "sk-abcdef12" not in str(e)


def test_retryable_classes_follow_design() -> None:
    assert E.ConnectError().retryable and E.ConnectTimeout().retryable
    assert E.ResetError(before_content=True).retryable
    assert not E.ResetError(before_content=False).retryable
    for status, ok in [
        (408, True),
        (429, True),
        (502, True),
        (503, True),
        (504, True),
        (500, False),
        (400, False),
        (401, False),
        (403, False),
    ]:
        assert E.error_from_status(status, "m").retryable is ok
    for cls in (
        E.FirstTokenTimeout,
        E.IdleTimeout,
        E.DeadlineExceeded,
        E.TruncatedStream,
        E.MalformedStream,
    ):
        assert not cls().retryable


def test_bad_settings_are_config_errors() -> None:
    import pytest

    from infersight.client import Timeouts

    for bad in ({"max_attempts": 0}, {"base_delay": -1.0}, {"max_delay": -0.1}):
        with pytest.raises(E.ConfigError):
            RetryPolicy(**bad)
    for bad_t in ({"connect": 0.0}, {"first_token": -1.0}, {"idle": 0.0}, {"total": -5.0}):
        with pytest.raises(E.ConfigError):
            Timeouts(**bad_t)
    with pytest.raises(E.ConfigError):
        RetryBudget(ratio=-0.1)
    assert RetryPolicy.none().max_attempts == 1 and RetryPolicy.none().budget is None
