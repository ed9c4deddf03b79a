"""The gateway's HTTP stack against h11 over a corpus of request-framing cases (CL.TE,
TE.CL, duplicated or signed Content-Length, bare LF in chunk lines, obs-fold, HTTP/0.9,
invalid trailers...): it refuses whatever h11 refuses, or is stricter, and every request
it accepts carries exactly the body h11 reads (no desynchronisation)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from infersight.gateway.listener import ClientLimits
from support.framing_cases import CASES, digest, echo_stack, h11_reading, server_reading

LIMITS = ClientLimits(head_timeout_s=0.5, body_timeout_s=0.5, keepalive_timeout_s=0.5)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def port() -> AsyncIterator[int]:
    async with echo_stack(LIMITS) as p:
        yield p


@pytest.mark.asyncio(loop_scope="module")
@pytest.mark.parametrize("name", sorted(CASES))
async def test_the_server_is_at_least_as_strict_as_h11(port: int, name: str) -> None:
    raw = CASES[name]
    ref = h11_reading(raw)
    got = await server_reading(port, raw)
    want = [digest(b) for b in ref.bodies]
    assert len(got.bodies) <= len(want), (got, ref)  # never a request h11 does not see
    assert got.bodies == want[: len(got.bodies)], (got, ref)  # and the same bodies
    if name.startswith("ok:"):
        assert got.bodies == want and not got.refused, (got, ref)  # as lenient where right
    if got.refused:
        assert all(400 <= s < 500 for s in got.statuses[len(got.bodies) :]), got


def test_the_corpus_covers_what_the_issue_names() -> None:
    names = " ".join(CASES).lower()
    for want in (
        "cl.te",
        "te.cl",
        "cl duplicated",
        "cl signed",
        "bare lf in a chunk",
        "obs-fold",
        "http/0.9",
        "invalid trailer",
    ):
        assert want in names, want
    assert sum(h11_reading(raw).refused for raw in CASES.values()) >= 15
