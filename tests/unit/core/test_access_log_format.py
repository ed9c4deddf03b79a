"""The access log's replay fields: chained message hashes (equal first k entries mean
equal first k messages, and nothing of the text), a session label that is a hash."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from infersight.core.access_log_format import prompt_fingerprint, session_label

messages = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["system", "user", "assistant"]), "content": st.text(max_size=40)}
    ),
    min_size=1,
    max_size=6,
)


@given(messages, messages)
@settings(max_examples=200, deadline=None)
def test_equal_leading_messages_give_equal_leading_entries(
    a: list[dict[str, str]], b: list[dict[str, str]]
) -> None:
    fa = prompt_fingerprint("chat", {"messages": a})
    fb = prompt_fingerprint("chat", {"messages": b})
    assert [e[2] for e in fa] == [len(m["content"]) for m in a]
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    assert fa[:k] == fb[:k]
    if k < min(len(a), len(b)):  # from the first difference on, the chain differs
        assert all(x[1] != y[1] for x, y in zip(fa[k:], fb[k:], strict=False))


def test_the_log_carries_no_prompt_text_and_no_raw_session_id() -> None:
    secret = "my system prompt with a password hunter2"
    fp = prompt_fingerprint(
        "chat",
        {
            "messages": [
                {"role": "system", "content": secret},
                {"role": "user", "content": [{"type": "text", "text": "hi"}]},
                {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]},
            ]
        },
    )
    assert [e[0] for e in fp] == ["system", "user", "assistant"]
    assert "hunter2" not in repr(fp) and fp[1][2] == 2
    assert prompt_fingerprint("completions", {"prompt": secret})[0][2] == len(secret)
    assert prompt_fingerprint("embeddings", {"input": secret}) == []
    label = session_label("user@example.com")
    assert label == session_label("user@example.com") != session_label("other")
    assert "example" not in label and label.startswith("s-")
