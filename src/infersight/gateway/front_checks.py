"""What the serve front checks beyond the OpenAI API: where llama.cpp is narrower.

A request can be valid OpenAI and still make llama.cpp answer 500 (it indexes into
the JSON without checking, and its model here reads text only). The front answers
those with a 400 that says why. Also the body checks of llama.cpp's own endpoints,
``/tokenize`` and ``/detokenize``.
"""

from __future__ import annotations

from typing import Any

from infersight.core.request_checks import is_int
from infersight.gateway.errors import InputError

__all__ = ["check_llama_chat", "check_llama_tokens"]


def _bad(message: str, param: str, code: str = "invalid_request") -> InputError:
    return InputError(message, param, code)


def check_llama_chat(doc: dict[str, Any]) -> None:
    """A chat body that already passed :func:`~infersight.gateway.http.validate`."""
    for i, m in enumerate(doc["messages"]):
        if len(m) == 2 and type(m.get("content")) is str:
            continue  # a role and its text (check_messages saw the role): nothing to add
        if "content" not in m and "tool_calls" not in m:
            raise _bad(f"'messages[{i}]' needs 'content' or 'tool_calls'", "messages")
        for name in ("name", "tool_call_id", "reasoning_content"):
            if name in m and not isinstance(m[name], str):
                raise _bad(f"'messages[{i}].{name}' must be a string", "messages")
        c = m.get("content")
        if isinstance(c, list) and any(p["type"] != "text" for p in c):
            raise _bad(
                f"'messages[{i}].content' has a non-text part: this server's model reads "
                "text only",
                "messages",
                "unsupported_content",
            )
        for j, call in enumerate(m.get("tool_calls") or ()):
            if call["type"] != "function" or "arguments" not in call.get("function", {}):
                raise _bad(
                    f"'messages[{i}].tool_calls[{j}]' must be a function call with "
                    "'arguments'",
                    "messages",
                )
    for j, tool in enumerate(doc.get("tools") or ()):
        if tool["type"] != "function":
            raise _bad(f"'tools[{j}]': this server supports function tools only", "tools")


def check_llama_tokens(endpoint: str, doc: dict[str, Any]) -> None:
    """``/tokenize`` (content: text or a list of text and token ids) or ``/detokenize``
    (tokens: token ids)."""
    if endpoint == "tokenize":
        c = doc.get("content")
        if not (isinstance(c, str) or (isinstance(c, list)
                                       and all(isinstance(x, str) or is_int(x) for x in c))):
            raise _bad("'content' must be a string or a list of strings and token ids",
                       "content")
        for flag in ("add_special", "with_pieces", "parse_special"):
            if flag in doc and not isinstance(doc[flag], bool):
                raise _bad(f"'{flag}' must be a boolean", flag)
    else:
        toks = doc.get("tokens")
        if not isinstance(toks, list) or not all(is_int(t) and t >= 0 for t in toks):
            raise _bad("'tokens' must be a list of token ids", "tokens")
