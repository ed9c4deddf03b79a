"""A deadline that passes in the upstream call is congestion only when the upstream had
the time a typical answer takes (docs/design.md section 4): otherwise the request spent
its deadline in the gateway's own queue, and the sample is neutral for the limiter, the
breaker and the health window."""

from __future__ import annotations

import logging
import time

import pytest

from infersight.core.errors import DeadlineExceeded, Overloaded
from infersight.gateway.admission import AdmissionController
from infersight.gateway.breaker import BreakerState
from infersight.gateway.call import Call
from infersight.gateway.config import UpstreamConfig
from infersight.gateway.failover import Failover
from infersight.gateway.limiter import Limiter, StaticLimit
from infersight.gateway.metrics import GatewayMetrics
from infersight.gateway.router import Candidate, Router
from infersight.gateway.upstream import Upstream


class Recording(Limiter):
    """A fixed limit that keeps every sample it is fed: (latency, dropped)."""

    def __init__(self) -> None:
        super().__init__(8)
        self.samples: list[tuple[float, bool]] = []

    def on_sample(self, latency: float, inflight: int, dropped: bool) -> None:
        self.samples.append((latency, dropped))


def test_cut_short_compares_the_upstream_share_with_the_typical_answer() -> None:
    a = AdmissionController(StaticLimit(4))
    assert not a.cut_short(0.01)  # nothing learned yet: an expiry counts, as before
    assert a.try_acquire()
    a.release(0.4)
    assert a.cut_short(0.39)  # less than a typical answer takes: says nothing
    assert not a.cut_short(0.4) and not a.cut_short(2.0)  # it had the time: counts


def _upstream(typical: float) -> tuple[Failover, Upstream, Recording]:
    metrics = GatewayMetrics()
    cfg = UpstreamConfig(name="a", url="http://127.0.0.1:9", models=["m"], breaker_failures=1)
    up = Upstream(cfg, metrics)
    rec = Recording()
    up.admission.set_limit(rec)
    assert up.admission.try_acquire()
    up.admission.release(typical)  # teaches the typical latency
    rec.samples.clear()
    return Failover(Router([up]), metrics), up, rec


def _call(seconds_left: float) -> Call:
    now = time.monotonic()
    body = {"model": "m", "messages": []}
    return Call(
        "r1", "chat", "/v1/chat/completions", body, "m", False, None, now, now + seconds_left
    )


async def _fail_with(fo: Failover, call: Call, error: Exception) -> None:
    async def attempt(up: Upstream, cand: Candidate) -> None:
        raise error

    with pytest.raises(type(error)):
        await fo.run(call, attempt)


async def test_a_deadline_cut_short_by_the_queue_is_neutral() -> None:
    # Typical answers take 5 s; the upstream got 0.5 s of the deadline.
    fo, up, rec = _upstream(typical=5.0)
    await _fail_with(fo, _call(0.5), DeadlineExceeded("passed its deadline"))
    assert rec.samples == []  # nothing fed to the limit
    assert up.breaker.state is BreakerState.CLOSED  # one failure would have opened it
    assert up.health.counts() == (0, 0)
    assert up.admission.inflight == 0  # the slot was given back all the same


async def test_a_deadline_the_upstream_had_time_for_counts_as_congestion() -> None:
    # Typical answers take 50 ms; the upstream had 0.5 s and still missed: slow upstream.
    fo, up, rec = _upstream(typical=0.05)
    await _fail_with(fo, _call(0.5), DeadlineExceeded("passed its deadline"))
    assert len(rec.samples) == 1 and rec.samples[0][1] is True
    assert up.breaker.state is BreakerState.OPEN
    assert up.health.counts() == (0, 1)


async def test_an_overload_backs_off_however_short_the_share() -> None:
    # The rule is about expired deadlines only: a 503 is congestion whatever the time left.
    fo, up, rec = _upstream(typical=5.0)
    await _fail_with(fo, _call(0.5), Overloaded("503", status=503))
    assert [d for _, d in rec.samples] == [True]
    assert up.health.counts() == (0, 1)


async def test_the_failure_log_says_failing_over_only_when_another_upstream_is_left(
    caplog: pytest.LogCaptureFixture,
) -> None:
    metrics = GatewayMetrics()
    ups = [
        Upstream(UpstreamConfig(name=n, url=f"http://127.0.0.1:{p}", models=["m"]), metrics)
        for n, p in (("a", 9), ("b", 10))
    ]
    fo = Failover(Router(ups), metrics)
    caplog.set_level(logging.WARNING, logger="infersight.gateway")
    await _fail_with(fo, _call(30.0), Overloaded("503", status=503))
    said = {r.getMessage().split(":")[0]: r.getMessage() for r in caplog.records}
    assert said["upstream a"].endswith("failing over"), said
    # b was the last candidate: the client gets the error, nothing fails over
    assert said["upstream b"].endswith("answering the client with an error"), said
    caplog.clear()
    # One upstream, out of time: the error goes to the client however the call failed.
    only, _, _ = _upstream(typical=0.05)
    await _fail_with(only, _call(0.5), DeadlineExceeded("passed its deadline"))
    (line,) = [r.getMessage() for r in caplog.records if "DeadlineExceeded" in r.getMessage()]
    assert line.endswith("answering the client with an error"), line
