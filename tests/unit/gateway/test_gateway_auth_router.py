"""Keys (hashed, constant-time), token buckets, routing order, request validation."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from infersight.core.errors import AuthError, BadRequest, RateLimited
from infersight.gateway.auth import KeyStore, TokenBucket, bearer_token
from infersight.gateway.config import CostRule, KeyConfig, hash_key
from infersight.gateway.request_body import estimate_tokens, parse_body, validate
from infersight.gateway.router import Router


async def test_keystore() -> None:
    t = [0.0]
    ks = KeyStore(
        [KeyConfig(name="a", sha256=hash_key("k1"), requests_per_minute=60)], clock=lambda: t[0]
    )
    assert ks.authenticate("Bearer k1") == "a"
    for bad in (None, "", "Bearer", "Basic k1", "Bearer k2"):
        with pytest.raises(AuthError) as ei:
            ks.authenticate(bad)
        assert "k1" not in str(ei.value)
    for _ in range(60):
        await ks.admit("a")
    with pytest.raises(RateLimited) as rl:
        await ks.admit("a")
    assert rl.value.retry_after == pytest.approx(1.0)
    t[0] += 1.0
    await ks.admit("a")
    assert KeyStore([]).authenticate(None) is None  # auth off


async def test_keystore_budget_refuses_once_spent() -> None:
    ks = KeyStore(
        [
            KeyConfig(name="b", sha256=hash_key("k"), max_cost_usd=0.01),
            KeyConfig(name="free", sha256=hash_key("f")),
        ]
    )
    await ks.admit("b")
    ks.charge_tokens("b", 100, 0.006)
    await ks.admit("b")  # $0.006 of $0.01: still within
    ks.charge_tokens("b", 100, 0.006)
    with pytest.raises(RateLimited) as ei:
        await ks.admit("b")
    assert getattr(ei.value, "code", None) == "insufficient_quota" and ei.value.status == 429
    assert "$0.0120 of $0.01" in str(ei.value)
    ks.charge_tokens("free", 100, 5.0)
    await ks.admit("free")  # no budget: never refused for spend
    assert ks.spend() == {"b": (pytest.approx(0.012), 0.01), "free": (5.0, None)}


def test_bearer() -> None:
    assert bearer_token("Bearer  abc ") == "abc" and bearer_token("bearer x") == "x"


@given(st.floats(1, 1000), st.lists(st.tuples(st.floats(0, 5), st.floats(0, 1)), max_size=50))
def test_bucket_never_exceeds_capacity(cap: float, steps: list[tuple[float, float]]) -> None:
    t = [0.0]
    b = TokenBucket(cap, clock=lambda: t[0])
    taken = 0.0
    for dt, frac in steps:
        amount = frac * cap
        t[0] += dt
        if b.take(amount) == 0.0:
            taken += amount
        assert b.level <= cap + 1e-9
    # never more than the initial fill plus the refill over the elapsed time
    assert taken <= cap + t[0] * cap / 60.0 + 1e-6


class U:
    def __init__(self, name: str, models: list[str], load: float = 0.0, up: bool = True):
        self.name, self.models, self._load, self._up = name, models, load, up

    def serves(self, model: str) -> bool:
        return model in self.models

    def load(self) -> float:
        return self._load

    def available(self) -> bool:
        return self._up

    def weight(self) -> float:
        return 1.0

    def seconds_until_probe(self) -> float:
        return 0.0 if self._up else 3.0


def test_router_order() -> None:
    a, b, c, d = U("a", ["big"], 0.5), U("b", ["big"], 0.1), U("c", ["small"]), U("d", ["alt"])
    r = Router(
        [a, b, c, d],
        fallbacks={"big": ["alt"], "alt": ["big"]},
        cost_rules=[CostRule(model="big", cheaper="small", max_tokens=100)],
    )
    names = [(x.upstream.name, x.model, x.fallback) for x in r.candidates("big", 500)]
    assert names == [("b", "big", False), ("a", "big", False), ("d", "alt", True)]
    assert r.candidates("big", 50)[0].upstream.name == "c"
    b._up = False
    assert [x.upstream.name for x in r.candidates("big", 500)] == ["a", "d"]
    a._up = d._up = False
    assert r.candidates("big", 500) == [] and r.probe_wait("big") == 3.0


def test_router_chain_is_computed_once_and_stays_bounded() -> None:
    r = Router(
        [U("a", ["big"])],
        fallbacks={"big": ["alt", "big"], "alt": ["x"]},
        cost_rules=[CostRule(model="big", cheaper="small", max_tokens=100)],
    )
    first = r.chain("big", 500)
    assert first == ["big", "alt", "x"] and r.chain("big", 50) == ["small", "big", "alt", "x"]
    first.append("mutated")  # callers get their own list: the cache is not theirs
    assert r.chain("big", 500) == ["big", "alt", "x"]
    assert len(r._chains) == 2
    for i in range(5000):  # clients choose model names: the cache must not grow with them
        assert r.chain(f"m{i}") == [f"m{i}"]
    assert len(r._chains) <= 4096


def test_validate_and_estimate() -> None:
    body: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": "x" * 40}],
        "max_tokens": 5,
    }
    assert validate("chat", body) == ("m", False)
    assert estimate_tokens("chat", body) == 15
    assert validate("embeddings", {"model": "m", "input": [[1, 2], [3]]}) == ("m", False)
    for endpoint, bad in [
        ("chat", {"model": "m", "messages": []}),
        ("completions", {"model": "m", "prompt": [1.5]}),
        ("embeddings", {"model": "m", "input": "x", "stream": True}),
        ("chat", {"model": "m", "messages": [{"role": "u"}], "n": 0}),
        ("chat", {"model": "m", "messages": [{"role": "u"}], "temperature": "hot"}),
    ]:
        with pytest.raises(BadRequest):
            validate(endpoint, bad)


@given(st.binary(max_size=200))
def test_parse_body_only_raises_bad_request(data: bytes) -> None:
    try:
        doc = parse_body(data)
    except BadRequest as e:
        assert e.status == 400
    else:
        assert isinstance(doc, dict)
