"""The one URL normaliser: a server root from what users paste (with or without /v1)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infersight.core.endpoint import Endpoint, server_root, shown_url
from infersight.telemetry import metrics_url


@pytest.mark.parametrize(
    ("url", "root"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("http://127.0.0.1:8000/", "http://127.0.0.1:8000"),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000"),
        ("http://127.0.0.1:8000/v1/", "http://127.0.0.1:8000"),
        ("  https://api.example.com/v1 ", "https://api.example.com"),
        ("https://api.example.com/openai/v1", "https://api.example.com/openai"),
        ("http://v1", "http://v1"),  # a host called v1 is a host
        ("http://v1:9000/v1", "http://v1:9000"),
        ("http://h/v10", "http://h/v10"),
        ("127.0.0.1:8000/v1", "127.0.0.1:8000"),
    ],
)
def test_server_root(url: str, root: str) -> None:
    assert server_root(url) == root


_host = st.from_regex(r"[a-z][a-z0-9-]{0,10}(\.[a-z0-9]{1,5}){0,2}(:[0-9]{1,5})?", fullmatch=True)
_path = st.lists(st.from_regex(r"[a-z0-9]{1,4}", fullmatch=True), max_size=3).map(
    lambda p: "".join("/" + x for x in p)
)


@given(
    scheme=st.sampled_from(["http://", "https://"]),
    host=_host,
    path=_path,
    v1=st.booleans(),
    slash=st.booleans(),
)
def test_server_root_properties(scheme: str, host: str, path: str, v1: bool, slash: bool) -> None:
    url = scheme + host + path + ("/v1" if v1 else "") + ("/" if slash else "")
    # One trailing /v1 goes (the one pasted, else one the path ends with); the scheme,
    # the host and the rest of the path stay.
    kept = path if v1 or not path.endswith("/v1") else path[: -len("/v1")]
    root = server_root(url)
    assert root == scheme + host + kept
    if not kept.endswith("/v1"):
        assert server_root(root) == root
    if not kept:  # the root or its OpenAI base URL: the same server's /metrics
        assert metrics_url(url) == root + "/metrics"


def test_endpoint_given_and_started() -> None:
    given_ep = Endpoint.given("http://127.0.0.1:8000/v1/")
    assert given_ep.url == "http://127.0.0.1:8000" and not given_ep.started
    assert given_ep.pid is None and given_ep.slots is None and dict(given_ep.settings) == {}
    started = Endpoint("http://127.0.0.1:1", started_by="bench", pid=42, slots=4, model="m")
    assert started.started and started.slots == 4


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:pass@10.0.0.5:8000", "http://10.0.0.5:8000"),
        ("https://key@api.example.com/openai?api-key=abc#x", "https://api.example.com/openai"),
        ("http://a@b@host/p", "http://host/p"),
        ("http://10.0.0.5:8000", "http://10.0.0.5:8000"),
        ("http://h/path@not-userinfo", "http://h/path@not-userinfo"),
    ],
)
def test_shown_url_drops_credentials(url: str, shown: str) -> None:
    assert shown_url(url) == shown


@given(
    user=st.text(
        st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="/?#@"),
        min_size=1,
        max_size=12,
    ),
    secret=st.text(
        st.characters(min_codepoint=33, max_codepoint=126, exclude_characters="/?#@"),
        min_size=6,
        max_size=24,
    ),
    path=st.sampled_from(["", "/v1", "/a/b"]),
)
def test_shown_url_never_shows_userinfo_or_query(user: str, secret: str, path: str) -> None:
    url = f"http://{user}:{secret}@host.example:8000{path}?token={secret}"
    shown = shown_url(url)
    assert secret not in shown and "@" not in shown
    assert shown == f"http://host.example:8000{path}"
