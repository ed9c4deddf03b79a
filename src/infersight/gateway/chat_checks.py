"""The structured fields of an OpenAI chat request: ``messages``, ``tools``, ``tool_choice``.

Called by :func:`infersight.gateway.http.validate` (the one entry point of request
validation). The checks follow the OpenAI API's types, and are exactly as strict as
the shapes engines index into without looking: llama.cpp, for one, answers 500 to a
tool without a name, a message whose ``name`` is a number, or a tool call without
``function`` (found by fuzzing ``infersight serve``).
"""

from __future__ import annotations

from typing import Any

from infersight.gateway.errors import InputError

__all__ = ["check_messages", "check_tools"]

#: Message fields that are strings when present (null: absent).
_STRING_FIELDS = ("name", "tool_call_id", "reasoning_content")
_TOOL_CHOICES = ("none", "auto", "required")


def _bad(message: str, param: str) -> InputError:
    return InputError(message, param, "invalid_request")


def _function(fn: Any, where: str, param: str) -> dict[str, Any]:
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise _bad(f"'{where}.function' must be an object with a string 'name'", param)
    return fn


def _content(i: int, c: Any) -> None:
    if c is None or isinstance(c, str):
        return
    if not isinstance(c, list):
        raise _bad(f"'messages[{i}].content' must be a string or a list", "messages")
    for j, part in enumerate(c):
        # A content part is an object naming its type; a text part carries its text.
        if not isinstance(part, dict) or not isinstance(part.get("type"), str) or (
            part["type"] == "text" and not isinstance(part.get("text"), str)
        ):
            raise _bad(
                f"'messages[{i}].content[{j}]' must be an object with a string 'type' "
                "(and a string 'text' for a text part)",
                "messages",
            )


def _tool_calls(i: int, calls: Any) -> None:
    if calls is None:
        return
    if not isinstance(calls, list):
        raise _bad(f"'messages[{i}].tool_calls' must be a list", "messages")
    for j, call in enumerate(calls):
        where = f"messages[{i}].tool_calls[{j}]"
        if not isinstance(call, dict) or not isinstance(call.get("type"), str):
            raise _bad(f"'{where}' must be an object with a string 'type'", "messages")
        if call.get("id") is not None and not isinstance(call["id"], str):
            raise _bad(f"'{where}.id' must be a string", "messages")
        if call["type"] == "function":
            _function(call.get("function"), where, "messages")


def check_messages(msgs: Any) -> None:
    """A non-empty list of message objects with a string role and well-typed fields."""
    if not isinstance(msgs, list) or not msgs:
        raise _bad("'messages' must be a non-empty list", "messages")
    for i, m in enumerate(msgs):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise _bad(f"'messages[{i}]' must be an object with a string 'role'", "messages")
        _content(i, m.get("content"))
        _tool_calls(i, m.get("tool_calls"))
        for name in _STRING_FIELDS:
            v = m.get(name)
            if v is not None and not isinstance(v, str):
                raise _bad(f"'messages[{i}].{name}' must be a string", "messages")


def check_tools(body: dict[str, Any]) -> None:
    """``tools``: a list of typed tool objects (a function tool has a named function);
    ``tool_choice``: none, auto, required, or an object naming its type."""
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise _bad("'tools' must be a list", "tools")
        for j, tool in enumerate(tools):
            if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
                raise _bad(f"'tools[{j}]' must be an object with a string 'type'", "tools")
            if tool["type"] != "function":
                continue
            fn = _function(tool.get("function"), f"tools[{j}]", "tools")
            if fn.get("description") is not None and not isinstance(fn["description"], str):
                raise _bad(f"'tools[{j}].function.description' must be a string", "tools")
            params = fn.get("parameters")
            if params is not None and not isinstance(params, dict):
                raise _bad(f"'tools[{j}].function.parameters' must be an object", "tools")
    choice = body.get("tool_choice")
    if choice is not None and not (
        choice in _TOOL_CHOICES or (isinstance(choice, dict) and isinstance(choice.get("type"), str))
    ):
        raise _bad(
            "'tool_choice' must be none, auto, required, or an object with a string 'type'",
            "tool_choice",
        )
