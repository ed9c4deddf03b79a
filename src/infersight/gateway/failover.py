"""Which upstream tries a request next: failover first, backoff second.

For each candidate upstream (router order): take an admission slot, then call it.
Anything that fails *before content reached the client* (connect errors, resets,
429/503, other 5xx, the first-byte limit, malformed streams) moves the request to the
next candidate at once, with no backoff, and counts against that upstream's health
and circuit breaker. A client error (400...) is returned as is. Once the first byte
of a stream was written to the client there is no failover.

Backoff belongs to the client (docs/design.md section 3) and is for a retry of the
*same* upstream, which waits only when nothing else can take the request: an attempt
is sent with a single try (no retry, no backoff) while another upstream of the same
model is admitting; the last one admitting gets the upstream's retry policy, jittered
backoff and the server's Retry-After included. An upstream that sent Retry-After is
not tried again by this request, while the others are. The request's one deadline
bounds everything.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from infersight.client import RetryPolicy
from infersight.core.errors import (
    AuthError,
    BadRequest,
    DeadlineExceeded,
    FirstTokenTimeout,
    InfersightError,
    OutOfMemory,
    RateLimited,
)
from infersight.gateway.call import Call
from infersight.gateway.errors import Shed
from infersight.gateway.metrics import GatewayMetrics
from infersight.gateway.public import FailureLog, mark
from infersight.gateway.router import Candidate, Router
from infersight.gateway.upstream import Upstream

__all__ = ["ONE_TRY", "Failover"]

T = TypeVar("T")

#: The retry policy of an attempt that another upstream can take over if it fails.
ONE_TRY = RetryPolicy.none()


def _upstream_fault(e: InfersightError) -> bool:
    """True when the error says something about the upstream's health."""
    return not (isinstance(e, BadRequest) and not isinstance(e, AuthError))


def _out_of_time(call: Call, e: InfersightError) -> bool:
    """Whether the request has no time left for another upstream after ``e``."""
    return isinstance(e, DeadlineExceeded) or time.monotonic() >= call.deadline


def _another_admitting(cands: list[Candidate], i: int) -> bool:
    """Whether a candidate after ``i``, for the same model, would take a request now."""
    model = cands[i].model
    for c in cands[i + 1 :]:
        u = c.upstream
        if c.model == model and isinstance(u, Upstream) and u.admitting():
            return True
    return False


class Failover:
    """Runs calls through the router's candidates with admission and failover."""

    def __init__(self, router: Router, metrics: GatewayMetrics) -> None:
        self.router = router
        self.metrics = metrics
        self.failures = FailureLog()

    def _no_candidate(self, call: Call, last: InfersightError | None) -> InfersightError:
        if last is not None:
            return last
        wait = self.router.probe_wait(call.model)
        self.metrics.rejections.labels("no_upstream").inc()
        return Shed(
            f"no upstream available for model {call.model!r}: every circuit is open",
            code="no_upstream_available",
            retry_after=max(1.0, wait or 1.0),
        )

    def _moved(self, call: Call, moved_from: tuple[str, str], to: str) -> None:
        """Count a failover that took place: ``to`` took the request over."""
        call.failovers += 1
        self.metrics.failovers.labels(*moved_from).inc()
        self.metrics.child(self.metrics.failover_pairs, moved_from[0], to).inc()
        if call.via is None:
            call.via = [moved_from[0]]
        call.via.append(to)

    async def run(self, call: Call, attempt: Callable[[Upstream, Candidate], Awaitable[T]]) -> T:
        """Try ``attempt`` on each candidate until one succeeds or must not be retried.

        A failover is counted when the next upstream takes the request over, not when
        one fails with nothing left to try."""
        last: InfersightError | None = None
        moved_from: tuple[str, str] | None = None
        cands = self.router.candidates(call.model, call.est_tokens)
        for i, cand in enumerate(cands):
            call.next_candidate = i + 1 < len(cands)
            up = cand.upstream
            assert isinstance(up, Upstream)
            if time.monotonic() >= call.deadline:
                raise DeadlineExceeded("request deadline passed before an upstream answered")
            if (wait := up.budget_wait()) > 0:  # over its rpm/tpm: the next candidate
                last = last or Shed(
                    f"upstream {up.name} is over its requests/tokens per minute",
                    code="upstream_rate_limit",
                    retry_after=wait,
                )
                continue
            if not up.breaker.allow():
                continue
            adm = up.admission
            try:
                # A free slot is taken without a coroutine (the common case).
                queued = (
                    0.0 if adm.try_acquire() else await adm.acquire(call.deadline, call.priority)
                )
            except Shed as e:
                up.breaker.record_neutral()
                last = e.with_traceback(None)  # see below: no cycle through this frame
                continue
            except BaseException:
                up.breaker.record_neutral()
                raise
            call.queue_delay += queued
            up.m_queue_delay.observe(queued)
            up.spend(requests=1)
            call.upstream = up.name
            call.served_model = cand.model
            # Another replica can take over at once: no retry (and no backoff) here.
            call.retry = ONE_TRY if _another_admitting(cands, i) else None
            if moved_from is not None:
                self._moved(call, moved_from, up.name)
                moved_from = None
            t0 = time.monotonic()
            dropped = False
            sample: bool = True
            whole: float | None = None  # a complete answer's seconds, to its last byte
            try:
                result = await attempt(up, cand)
            except InfersightError as e:
                # decided once: both the raise below and the log line's "failing over"
                out_of_time = _out_of_time(call, e)
                self._upstream_error(call, up, e, out_of_time)
                if call.committed or not _upstream_fault(e):
                    up.breaker.record_neutral()
                    raise
                if isinstance(e, DeadlineExceeded) and adm.cut_short(call.deadline - t0):
                    # The deadline was mostly spent before this call (in the queue): the
                    # upstream's share was too short to say anything about its health, so
                    # the sample is neutral for the limiter, breaker and health window.
                    up.breaker.record_neutral()
                    sample = False
                    raise
                dropped = True
                up.health.record(False)
                if isinstance(e, RateLimited) or (
                    isinstance(e, DeadlineExceeded | FirstTokenTimeout) and adm.answered_since(t0)
                ):
                    # "Slow down" is the limiter's business (dropped=True shrinks it) and a
                    # reason to try another replica, not proof that the upstream is broken;
                    # so is a deadline or first-byte limit missed while the upstream
                    # finished other answers: it is busy, and opening its circuit would turn
                    # an overload into an outage. One that answered nothing meanwhile (a
                    # hang) still counts.
                    up.breaker.record_neutral()
                else:
                    # Out of memory counts like a 503: the limiter backs off (dropped)
                    # and repeated ones open the circuit.
                    up.breaker.record_failure()
                if out_of_time:
                    raise
                # Kept without its traceback: the traceback holds this frame, whose
                # ``last`` would hold it back, a cycle left for the garbage collector on
                # every failover.
                last = e.with_traceback(None)
                moved_from = (up.name, e.kind)
                continue
            except BaseException:
                # Cancelled (the client hung up): leaving the client's context manager
                # closed the upstream connection, which frees its slot there too.
                up.breaker.record_neutral()
                sample = False
                raise
            else:
                if call.error == "TruncatedStream":
                    up.breaker.record_failure()
                    up.health.record(False)
                    dropped = True
                elif call.error == "DeadlineExceeded":
                    # Its deadline ended a stream the upstream was still answering: a
                    # missed deadline like any other (congestion, never the breaker's).
                    up.breaker.record_neutral()
                    up.health.record(False)
                    dropped = True
                elif call.error == "Cancelled":
                    up.breaker.record_neutral()
                else:
                    up.breaker.record_success()
                    up.health.record(True)
                    whole = time.monotonic() - t0
                up.spend(tokens=call.prompt_tokens + call.completion_tokens)
                if cand.fallback:
                    self.metrics.fallbacks.labels(call.model, cand.model).inc()
                return result
            finally:
                # For streams the limiter learns from time-to-first-content: it rises with
                # queueing inside the upstream but not with the answer's length.
                # (Queue/in-flight gauges are refreshed when /metrics is scraped.)
                end = call.first_content_at if call.first_content_at else time.monotonic()
                call.first_content_at = None
                adm.release(end - t0 if sample else None, dropped=dropped, whole=whole)
        raise self._no_candidate(call, last)

    def _upstream_error(
        self, call: Call, up: Upstream, e: InfersightError, out_of_time: bool
    ) -> None:
        """Count, log and mark (for a URL-free client message) an upstream's failure."""
        rec = getattr(e, "record", None)
        self._count_attempts(call, up, getattr(rec, "attempts", 1) or 1)
        self.metrics.child(self.metrics.upstream_errors, up.name, e.kind).inc()
        mark(e, up.name)
        client_fault = isinstance(e, BadRequest) and not isinstance(e, AuthError | OutOfMemory)
        if not client_fault:
            # "failing over" only where run() goes on to another upstream
            moves = not call.committed and call.next_candidate and not out_of_time
            self.failures.failure(e, up.name, up.cfg.url, failover=moves)

    def _count_attempts(self, call: Call, up: Upstream, attempts: int) -> None:
        call.attempts += attempts
        if attempts > 1:
            up.m_retries.inc(attempts - 1)
