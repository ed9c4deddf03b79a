"""The one check of an OpenAI request body's fields, where the API fixes their types.

Used by the gateway (:func:`infersight.gateway.request_body.validate`, which adds what
only a server decides: the model, ``stream``) and by ``batch`` for its input lines;
and, for the embedded llama.cpp engine behind the gateway (``infersight serve``), the
checks where llama.cpp is narrower than the API (:func:`check_llama_chat`) and the
bodies of its own endpoints (:func:`check_llama_tokens`). The checks follow the OpenAI
API's types, and are exactly as strict as the shapes engines index into without
looking: llama.cpp, for one, answers 500 to a
tool without a name, a message whose ``name`` is a number, or a tool call without
``function`` (found by fuzzing ``infersight serve``). Hand-written rather than pydantic:
it runs on every request on the proxy's hot path.

Every refusal is an :class:`~infersight.core.errors.InvalidRequest` naming the field
(``param``).
"""

from __future__ import annotations

from typing import Any

from infersight.core.errors import InvalidRequest
from infersight.core.numbers import as_float

__all__ = [
    "check_body",
    "check_llama_chat",
    "check_llama_tokens",
    "check_messages",
    "check_options",
    "is_int",
]

#: Message fields that are strings when present (null: absent).
_STRING_FIELDS = ("name", "tool_call_id", "reasoning_content")
_TOOL_CHOICES = ("none", "auto", "required")
#: The options check_options knows: counts, numbers, and the rest by name.
_COUNTS = frozenset({"max_tokens", "max_completion_tokens"})
_NUMBERS = frozenset({"temperature", "top_p", "presence_penalty", "frequency_penalty"})
_OPTIONS = _COUNTS | _NUMBERS | {"n", "stop", "stream_options"}


def _function(fn: Any, where: str, param: str) -> dict[str, Any]:
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
        raise InvalidRequest(f"'{where}.function' must be an object with a string 'name'", param)
    return fn


def _content(i: int, c: Any) -> None:
    if c is None or isinstance(c, str):
        return
    if not isinstance(c, list):
        raise InvalidRequest(f"'messages[{i}].content' must be a string or a list", "messages")
    for j, part in enumerate(c):
        # A content part is an object naming its type; a text part carries its text.
        if (
            not isinstance(part, dict)
            or not isinstance(part.get("type"), str)
            or (part["type"] == "text" and not isinstance(part.get("text"), str))
        ):
            raise InvalidRequest(
                f"'messages[{i}].content[{j}]' must be an object with a string 'type' "
                "(and a string 'text' for a text part)",
                "messages",
            )


def _tool_calls(i: int, calls: Any) -> None:
    if calls is None:
        return
    if not isinstance(calls, list):
        raise InvalidRequest(f"'messages[{i}].tool_calls' must be a list", "messages")
    for j, call in enumerate(calls):
        where = f"messages[{i}].tool_calls[{j}]"
        if not isinstance(call, dict) or not isinstance(call.get("type"), str):
            raise InvalidRequest(f"'{where}' must be an object with a string 'type'", "messages")
        if call.get("id") is not None and not isinstance(call["id"], str):
            raise InvalidRequest(f"'{where}.id' must be a string", "messages")
        if call["type"] == "function":
            _function(call.get("function"), where, "messages")


def check_messages(msgs: Any) -> None:
    """A non-empty list of message objects with a string role and well-typed fields."""
    if not isinstance(msgs, list) or not msgs:
        raise InvalidRequest("'messages' must be a non-empty list", "messages")
    for i, m in enumerate(msgs):
        if (
            type(m) is dict
            and len(m) == 2
            and type(m.get("role")) is str
            and (type(m.get("content")) is str)
        ):
            continue  # the usual message, a role and its text: nothing more to check
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise InvalidRequest(
                f"'messages[{i}]' must be an object with a string 'role'", "messages"
            )
        _content(i, m.get("content"))
        _tool_calls(i, m.get("tool_calls"))
        for name in _STRING_FIELDS:
            v = m.get(name)
            if v is not None and not isinstance(v, str):
                raise InvalidRequest(f"'messages[{i}].{name}' must be a string", "messages")


def check_tools(body: dict[str, Any]) -> None:
    """``tools``: a list of typed tool objects (a function tool has a named function);
    ``tool_choice``: none, auto, required, or an object naming its type."""
    tools = body.get("tools")
    if tools is not None:
        if not isinstance(tools, list):
            raise InvalidRequest("'tools' must be a list", "tools")
        for j, tool in enumerate(tools):
            if not isinstance(tool, dict) or not isinstance(tool.get("type"), str):
                raise InvalidRequest(
                    f"'tools[{j}]' must be an object with a string 'type'", "tools"
                )
            if tool["type"] != "function":
                continue
            fn = _function(tool.get("function"), f"tools[{j}]", "tools")
            if fn.get("description") is not None and not isinstance(fn["description"], str):
                raise InvalidRequest(f"'tools[{j}].function.description' must be a string", "tools")
            params = fn.get("parameters")
            if params is not None and not isinstance(params, dict):
                raise InvalidRequest(f"'tools[{j}].function.parameters' must be an object", "tools")
    choice = body.get("tool_choice")
    if choice is not None and not (
        choice in _TOOL_CHOICES
        or (isinstance(choice, dict) and isinstance(choice.get("type"), str))
    ):
        raise InvalidRequest(
            "'tool_choice' must be none, auto, required, or an object with a string 'type'",
            "tool_choice",
        )


def is_int(v: Any) -> bool:
    """An integer (a JSON number without a fraction), not a boolean."""
    return isinstance(v, int) and not isinstance(v, bool)


def check_text_or_tokens(v: Any, param: str) -> None:
    """str | list[str] | list[int] | list[list[int]], non-empty."""
    if isinstance(v, str):
        return
    if isinstance(v, list) and v:
        if all(isinstance(x, str) for x in v) or all(is_int(x) for x in v):
            return
        if all(isinstance(x, list) and x and all(is_int(t) for t in x) for x in v):
            return
    raise InvalidRequest(
        f"'{param}' must be a string, a non-empty list of strings, or token id list(s)",
        param,
    )


def check_options(body: dict[str, Any]) -> None:
    """Sampling and output options."""
    # Only the options the body names are looked at, in the body's order: a request
    # names few of the many, and this runs on every request.
    for name in body:
        if name not in _OPTIONS:
            continue
        v = body[name]
        if v is None:
            continue
        if name in _COUNTS:
            if not is_int(v) or v < 0:
                raise InvalidRequest(f"'{name}' must be a non-negative integer", name)
        elif name in _NUMBERS:
            if as_float(v) is None:
                raise InvalidRequest(f"'{name}' must be a number", name)
        elif name == "n":
            if not is_int(v) or not 1 <= v <= 128:
                raise InvalidRequest("'n' must be an integer from 1 to 128", "n")
        elif name == "stop":
            if not (
                isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))
            ):
                raise InvalidRequest("'stop' must be a string or a list of strings", "stop")
        elif not isinstance(v, dict) or not isinstance(v.get("include_usage", False), bool):
            raise InvalidRequest(
                "'stream_options' must be an object; 'include_usage' a boolean", "stream_options"
            )


def check_body(endpoint: str, body: dict[str, Any]) -> None:
    """The input field of ``endpoint`` ("chat", "completions" or "embeddings") and the
    options; not the model or ``stream`` (the caller's rules)."""
    if endpoint == "chat":
        check_messages(body.get("messages"))
        check_tools(body)
    elif endpoint == "completions":
        check_text_or_tokens(body.get("prompt"), "prompt")
    elif endpoint == "embeddings":
        check_text_or_tokens(body.get("input"), "input")
    check_options(body)


def check_llama_chat(doc: dict[str, Any]) -> None:
    """What llama.cpp needs of a chat body beyond the API (one that passed
    :func:`check_body`): it indexes into the JSON without looking, and answers 500 to a
    message with neither content nor tool calls, a tool call without arguments, or a
    non-function tool; the embedded model reads text only."""
    for i, m in enumerate(doc["messages"]):
        if len(m) == 2 and type(m.get("content")) is str:
            continue  # a role and its text (check_messages saw the role): nothing to add
        if "content" not in m and "tool_calls" not in m:
            raise InvalidRequest(f"'messages[{i}]' needs 'content' or 'tool_calls'", "messages")
        for name in _STRING_FIELDS:  # null too: llama.cpp takes a present field as a string
            if name in m and not isinstance(m[name], str):
                raise InvalidRequest(f"'messages[{i}].{name}' must be a string", "messages")
        c = m.get("content")
        if isinstance(c, list) and any(p["type"] != "text" for p in c):
            raise InvalidRequest(
                f"'messages[{i}].content' has a non-text part: this server's model reads text only",
                "messages",
                "unsupported_content",
            )
        for j, call in enumerate(m.get("tool_calls") or ()):
            if call["type"] != "function" or "arguments" not in call.get("function", {}):
                raise InvalidRequest(
                    f"'messages[{i}].tool_calls[{j}]' must be a function call with 'arguments'",
                    "messages",
                )
    for j, tool in enumerate(doc.get("tools") or ()):
        if tool["type"] != "function":
            raise InvalidRequest(f"'tools[{j}]': this server supports function tools only", "tools")


def check_llama_tokens(endpoint: str, doc: dict[str, Any], n_vocab: int | None = None) -> None:
    """llama.cpp's ``/tokenize`` (``content``: text, or a list of text and token ids)
    or ``/detokenize`` (``tokens``: token ids of this model, below ``n_vocab`` when it
    is known: llama.cpp answers 500 to any other)."""
    if endpoint == "tokenize":
        c = doc.get("content")
        if not (
            isinstance(c, str)
            or (isinstance(c, list) and all(isinstance(x, str) or is_int(x) for x in c))
        ):
            raise InvalidRequest(
                "'content' must be a string or a list of strings and token ids", "content"
            )
        for flag in ("add_special", "with_pieces", "parse_special"):
            if flag in doc and not isinstance(doc[flag], bool):
                raise InvalidRequest(f"'{flag}' must be a boolean", flag)
        return
    toks = doc.get("tokens")
    if not isinstance(toks, list) or not all(is_int(t) and t >= 0 for t in toks):
        raise InvalidRequest("'tokens' must be a list of token ids", "tokens")
    if n_vocab is not None:
        for i, t in enumerate(toks):
            if t >= n_vocab:
                raise InvalidRequest(
                    f"'tokens[{i}]' = {t} is not a token id of this model (0 to {n_vocab - 1})",
                    "tokens",
                )
