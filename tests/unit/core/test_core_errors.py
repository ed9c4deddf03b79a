"""The one error tree (docs/design.md section 3): status mapping, retry rules, kinds, and
pydantic reports as one ConfigError line."""

from __future__ import annotations

from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, Field, ValidationError

from infersight.core import errors as E
from infersight.core.settings import config_error


@given(status=st.integers(min_value=400, max_value=599))
def test_every_error_status_maps_to_the_most_specific_type(status: int) -> None:
    e = E.error_from_status(status, "m", body="b", request_id="r", retry_after=2.0)
    expected: type[E.StatusError]
    if status in (401, 403):
        expected = E.AuthError
    elif status == 429:
        expected = E.RateLimited
    elif status == 503:
        expected = E.Overloaded
    elif status >= 500:
        expected = E.ServerError
    else:
        expected = E.BadRequest
    assert type(e) is expected
    assert (e.status, e.body, e.request_id, e.retry_after) == (status, "b", "r", 2.0)
    assert e.retryable == (status in {408, 429, 502, 503, 504})
    assert e.kind == expected.__name__


def test_retry_rules() -> None:
    assert E.ConnectError().retryable and E.ConnectTimeout().retryable
    assert not E.ReadError().retryable and not E.FirstTokenTimeout().retryable
    assert E.ResetError(before_content=True).retryable
    assert not E.ResetError(before_content=False).retryable
    assert not E.TruncatedStream().retryable and not E.ConfigError().retryable
    assert not E.AuthError(status=401).retryable


def test_tree_shape_and_openai_types() -> None:
    assert issubclass(E.DeadlineExceeded, E.Timeout) and issubclass(E.Timeout, E.TransportError)
    assert issubclass(E.ResetError, E.ReadError) and issubclass(E.TruncatedStream, E.ProtocolError)
    assert issubclass(E.DataError, E.InfersightError) and not issubclass(E.DataError, ValueError)
    for name in E.__all__:
        obj = getattr(E, name)
        if isinstance(obj, type):
            assert issubclass(obj, E.InfersightError), name
    assert E.AuthError().openai_type == "authentication_error"
    assert E.RateLimited().openai_type == "rate_limit_error"
    assert E.ConfigError().openai_type == "invalid_request_error"
    assert E.IdleTimeout().openai_type == "timeout"


def test_message_defaults_to_the_docstring_and_record_is_empty() -> None:
    e = E.Overloaded()
    assert str(e) == "503: the server is overloaded or unavailable."
    assert e.record is None and E.Overloaded("busy").message == "busy"


class _Cfg(BaseModel):
    max_tokens: int = Field(1, ge=1)
    mode: Literal["a", "b"] = "a"


def _report(**kw: object) -> ValidationError:
    with pytest.raises(ValidationError) as ei:
        _Cfg(**kw)  # type: ignore[arg-type]
    return ei.value


def test_config_error_names_a_flag_an_env_var_or_a_key() -> None:
    e = _report(max_tokens=0)
    flag = config_error(e, names="flag")
    assert isinstance(flag, E.ConfigError)
    assert str(flag) == "--max-tokens: Input should be greater than or equal to 1"
    env = config_error(e, names="env", env_prefix="INFERSIGHT_BENCH_")
    assert (
        str(env)
        == "INFERSIGHT_BENCH_MAX_TOKENS: Input should be greater than or equal to 1 (got 0)"
    )
    key = config_error(_report(mode="c"), where="gateway config gw.toml")
    assert str(key).startswith("gateway config gw.toml: mode: Input should be 'a' or 'b'")


@given(bad=st.integers(max_value=0))
def test_config_error_is_one_line_and_reports_the_first_problem(bad: int) -> None:
    e = config_error(_report(max_tokens=bad, mode="z"), names="flag")
    assert "\n" not in str(e) and str(e).startswith("--max-tokens: ")


def test_validator_value_errors_lose_pydantic_prefix() -> None:
    from pydantic import model_validator

    class C(BaseModel):
        x: int = 0

        @model_validator(mode="after")
        def _check(self) -> C:
            if self.x < 0:
                raise ValueError("x must not be negative")
            return self

    with pytest.raises(ValidationError) as ei:
        C(x=-1)
    assert str(config_error(ei.value, names="flag")) == "x must not be negative"


def test_file_error_is_one_line_naming_the_file(tmp_path: object) -> None:
    from pathlib import Path

    p = Path(str(tmp_path))
    missing = E.file_error(
        p / "a.toml", FileNotFoundError(2, "No such file or directory"), "price table"
    )
    assert str(missing) == f"price table {p / 'a.toml'}: cannot read (no such file)"
    assert (
        str(E.file_error(p, IsADirectoryError(21, "Is a directory")))
        == f"{p}: cannot read (it is a directory)"
    )
    denied = E.file_error(p / "b", PermissionError(13, "Permission denied"))
    assert isinstance(denied, E.ConfigError) and str(denied).endswith(
        "cannot read (Permission denied)"
    )
