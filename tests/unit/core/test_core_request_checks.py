"""The shared OpenAI body checks: options looked at only where the body names them, and
plain messages passed without the full walk, with the same verdicts as the full rules."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.core.errors import InvalidRequest
from infersight.core.request_checks import check_messages, check_options

#: For each option, values that are valid and values that are not.
GOOD: dict[str, list[Any]] = {
    "max_tokens": [0, 1, 4096, None],
    "max_completion_tokens": [7, None],
    "n": [1, 128],
    "temperature": [0, 0.7, 2],
    "top_p": [1.0],
    "presence_penalty": [-1.5],
    "frequency_penalty": [0],
    "stop": ["\n", ["a", "b"], []],
    "stream_options": [{}, {"include_usage": True}],
}
BAD: dict[str, list[Any]] = {
    "max_tokens": [-1, 1.5, "5", True],
    "max_completion_tokens": [-3],
    "n": [0, 129, 2.0],
    "temperature": [math.nan, math.inf, "0.5", False],
    "top_p": ["x"],
    "presence_penalty": [[1]],
    "frequency_penalty": [{}],
    "stop": [3, ["a", 1]],
    "stream_options": [[], {"include_usage": "yes"}],
}
OTHER = {"model": "m", "messages": [], "user": 3, "seed": "anything", "logit_bias": {}}


@st.composite
def bodies(draw: st.DrawFn) -> tuple[dict[str, Any], str | None]:
    """A body with some options, and the first invalid one in the body's order (or None)."""
    names = draw(st.lists(st.sampled_from(sorted(GOOD) + sorted(OTHER)), unique=True, max_size=8))
    body: dict[str, Any] = {}
    first_bad = None
    for name in names:
        if name in OTHER:
            body[name] = OTHER[name]
        elif draw(st.booleans()):
            body[name] = draw(st.sampled_from(GOOD[name]))
        else:
            body[name] = draw(st.sampled_from(BAD[name]))
            first_bad = first_bad or name
    return body, first_bad


@settings(max_examples=400)
@given(case=bodies())
def test_options_are_refused_exactly_when_one_is_invalid(
    case: tuple[dict[str, Any], str | None],
) -> None:
    body, first_bad = case
    if first_bad is None:
        check_options(body)
    else:
        with pytest.raises(InvalidRequest) as e:
            check_options(body)
        assert e.value.param == first_bad


@pytest.mark.parametrize(
    "msg",
    [
        {"role": "user", "content": 5},  # two fields, but the text is not text
        {"role": 1, "content": "x"},  # two fields, but the role is a number
        {"role": "user", "content": "x", "name": 3},
        {"content": "x", "name": "n"},  # two fields, no role
        {"role": "user", "content": [{"type": "text", "text": 1}]},
        ["role", "content"],
    ],
)
def test_messages_off_the_plain_path_get_the_full_rules(msg: Any) -> None:
    with pytest.raises(InvalidRequest):
        check_messages([{"role": "system", "content": "ok"}, msg])


def test_plain_and_rich_valid_messages_pass() -> None:
    check_messages(
        [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}], "name": "u"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "content": "42", "tool_call_id": "1"},
        ]
    )
