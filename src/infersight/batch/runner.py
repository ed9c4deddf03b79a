"""The batch run loop: schedule rows under the controller's limit, retry, write, stop.

The runner schedules retries itself (the client is built with ``RetryPolicy.none()``)
so that the concurrency controller sees every attempt, 429s included, and a row
waiting for its Retry-After does not hold a slot; how many attempts and how long to
wait between them come from the caller's :class:`~infersight.client.RetryPolicy`
(docs/design.md section 3: the client's policy owns backoff). Rows that stay failed after
the policy's ``max_attempts`` (or fail with a non-retryable error) are written with
their typed error.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import signal
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from infersight.batch.budget import CostMeter
from infersight.batch.input import BatchRow
from infersight.batch.output import OutputWriter, error_line, result_line
from infersight.batch.progress import BatchProgress
from infersight.client import RetryPolicy
from infersight.control.controller import ConcurrencyController
from infersight.core.errors import (
    AuthError,
    InfersightError,
    OutOfMemory,
    Overloaded,
    RateLimited,
    StatusError,
    Timeout,
)
from infersight.core.interrupts import stop_text
from infersight.core.records import RequestRecord

__all__ = ["CUSTOM_ID_HEADER", "RowRunner", "is_congestion"]

#: Header carrying the row's custom_id (percent-encoded), so servers can log/count it.
CUSTOM_ID_HEADER = "X-Batch-Custom-Id"
_FLUSH_EVERY = 0.2


def is_congestion(e: InfersightError) -> bool:
    """Errors that mean "too much load": back off on them (an engine out of memory
    is overloaded too, in memory rather than in slots)."""
    if isinstance(e, RateLimited | Overloaded | OutOfMemory | Timeout):
        return True
    return isinstance(e, StatusError) and e.status in (408, 502, 504)


@dataclass(order=True)
class _Retry:
    not_before: float
    seq: int
    row: BatchRow  # never compared: seq is unique
    attempt: int


class RowRunner:
    """Runs rows through ``client`` and writes each result line as it completes."""

    def __init__(
        self,
        client: Any,
        rows: Iterator[BatchRow],
        *,
        ctrl: ConcurrencyController,
        meter: CostMeter,
        writer: OutputWriter,
        progress: BatchProgress,
        retry: RetryPolicy,
        stream: bool = False,
        default_model: str | None = None,
        max_retry_wait: float = 300.0,
    ) -> None:
        self.client, self.rows, self.ctrl, self.meter = client, rows, ctrl, meter
        self.writer, self.progress = writer, progress
        self.retry, self.stream, self.default_model = retry, stream, default_model
        #: A Retry-After longer than this fails the row at once (docs/design.md s.3: fail
        #: fast when the wait does not fit); --retry-failed runs it later.
        self.max_retry_wait = max_retry_wait
        self.done = self.failed = self.attempts = self.retries = 0
        self.errors: Counter[str] = Counter()
        self.failed_by_kind: Counter[str] = Counter()
        self.stopped = "completed"
        self.fatal: InfersightError | None = None
        self.max_limit = ctrl.limit
        self.t_first: float | None = None
        self.t_last: float | None = None
        self._retry: list[_Retry] = []
        self._seq = itertools.count()
        self._held: BatchRow | None = None
        self._tasks: dict[asyncio.Task[tuple[bool, Any, float]], tuple[BatchRow, int]] = {}
        self._wake = asyncio.Event()
        self._closing = asyncio.Event()
        self._stopping = False
        self._cancel_at: float | None = None
        self._exhausted = False
        self._budget_stop = False
        self._n_decisions = len(ctrl.decisions)
        self._flush_task: asyncio.Task[int] | None = None

    # -- control from outside (Ctrl-C) -------------------------------------------------
    def request_stop(self, grace: float, sig: int | None = None) -> None:
        """First call: send nothing new, give rows in flight ``grace`` s; second: cancel.
        ``sig`` (SIGINT, SIGTERM) is named in the note."""
        now = time.monotonic()
        if self._stopping:
            self._cancel_at = now
        else:
            self._stopping, self._cancel_at = True, now + grace
            self.stopped = "interrupted"
            again = " (Ctrl-C again to cancel them)" if sig in (None, signal.SIGINT) else ""
            self.progress.note(
                f"{stop_text(sig)}: no new rows; waiting up to {grace:g} s for "
                f"{len(self._tasks)} in flight{again}"
            )
        self._wake.set()

    # -- scheduling --------------------------------------------------------------------
    def _next(self, now: float) -> tuple[BatchRow, int] | None:
        if self._retry and self._retry[0].not_before <= now:
            r = heapq.heappop(self._retry)
            return r.row, r.attempt
        if self._budget_stop or self._exhausted:
            return None
        row = self._held or next(self.rows, None)
        self._held = None
        if row is None:
            self._exhausted = True
            return None
        if not self.meter.reserve(row):
            self._held, self._budget_stop = row, True
            self.stopped = "budget"
            self.progress.note(
                f"--max-cost: stopping new rows at ${self.meter.total:.4f} spent + "
                f"${self.meter.inflight_estimate:.4f} in flight (next row "
                f"~${self.meter.estimate(row):.4f})"
            )
            return None
        return row, 1

    def _fill(self) -> None:
        now = time.monotonic()
        while (
            not self._stopping
            and len(self._tasks) < self.ctrl.limit
            and now >= self.ctrl.pause_until
        ):
            item = self._next(now)
            if item is None:
                return
            row, attempt = item
            self.ctrl.on_send(now)
            task = asyncio.create_task(self._attempt(row, now))
            task.add_done_callback(lambda _t: self._wake.set())
            self._tasks[task] = (row, attempt)
            self.attempts += 1
            if self.t_first is None:
                self.t_first = now

    async def _attempt(self, row: BatchRow, t0: float) -> tuple[bool, Any, float]:
        body = dict(row.body)
        if not body.get("model") and self.default_model:
            body["model"] = self.default_model
        if self.stream and row.url != "/v1/embeddings":
            body["stream"] = True
        # Percent-encoded: a custom_id may hold characters a header cannot.
        rid = quote(row.custom_id, safe="")
        rec = RequestRecord(request_id=rid, scheduled=t0)
        try:
            comp = await self.client.request(
                row.url, body, request_id=rid, headers={CUSTOM_ID_HEADER: rid}, record=rec
            )
        except InfersightError as e:
            return False, e, t0
        except Exception as e:  # a bug below us must cost one row, never the run
            return False, InfersightError(f"unexpected {type(e).__name__}: {e}"), t0
        return True, comp, t0

    def _done_now(self) -> bool:
        if self._tasks:
            return False
        if self._stopping or self.fatal is not None:
            return True
        return not self._retry and (self._exhausted or self._budget_stop)

    async def run(self) -> None:
        """Run until every row is written, the budget stops it, or a stop request."""
        flusher = asyncio.create_task(self._flush_loop())
        try:
            while True:
                self._fill()
                if self._done_now():
                    break
                now = time.monotonic()
                wait = 0.5
                if self._retry:
                    wait = min(wait, self._retry[0].not_before - now)
                if self.ctrl.pause_until > now:
                    wait = min(wait, self.ctrl.pause_until - now)
                if self._cancel_at is not None:
                    wait = min(wait, self._cancel_at - now)
                    if now >= self._cancel_at:
                        for t in self._tasks:
                            t.cancel()
                self._wake.clear()
                if not any(t.done() for t in self._tasks):
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), max(0.001, wait))
                self._collect()
        finally:
            for t in self._tasks:
                t.cancel()
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
            self._closing.set()
            await flusher
            if self._flush_task is not None:
                await self._flush_task
            await self.writer.flush()

    async def _flush_loop(self) -> None:
        # Ends on _closing, never by cancellation, so no write is ever abandoned.
        while not self._closing.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), _FLUSH_EVERY)
            await self.writer.flush()

    # -- results -----------------------------------------------------------------------
    def _collect(self) -> None:
        for task in [t for t in self._tasks if t.done()]:
            row, attempt = self._tasks.pop(task)
            if task.cancelled():
                self.meter.release(row)  # not written: a rerun runs it again
                continue
            ok, value, t0 = task.result()
            now = time.monotonic()
            self.t_last = now
            if ok:
                self._success(row, value, t0, now)
            else:
                self._failure(row, attempt, value, t0, now)
        if self.writer.pending >= self.writer.max_rows and (
            self._flush_task is None or self._flush_task.done()
        ):
            self._flush_task = asyncio.create_task(self.writer.flush())
        for d in self.ctrl.decisions[self._n_decisions :]:
            self.progress.decision(d)
        self._n_decisions = len(self.ctrl.decisions)
        self.max_limit = max(self.max_limit, self.ctrl.limit)
        self.progress.update(
            done=self.done,
            failed=self.failed,
            tokens=self.meter.completion_tokens,
            errors=sum(self.errors.values()),
            limit=self.ctrl.limit,
            inflight=len(self._tasks),
        )

    def _success(self, row: BatchRow, comp: Any, t0: float, now: float) -> None:
        rec: RequestRecord = comp.record
        self.ctrl.on_success(now, started=t0, latency=now - t0, ttft=rec.ttft, tpot=rec.tpot)
        usage = comp.usage or (comp.response or {}).get("usage")
        if isinstance(usage, dict):
            p, c = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        else:  # no usage from the server: the client's counts (estimated from chunks)
            p, c = rec.prompt_tokens or 0, rec.output_tokens
        if row.url == "/v1/embeddings":
            c = 0
        model = (comp.response or {}).get("model")
        self.meter.record(row, p, c, model if isinstance(model, str) else None)
        # The server's id for the request, else the X-Request-Id it was sent with (an
        # engine such as llama.cpp names none): every answered row carries one.
        rid = rec.server_request_id or comp.headers.get("x-request-id") or rec.request_id
        self.writer.add(
            result_line(row.custom_id, status=comp.status, body=comp.response, request_id=rid)
        )
        self.done += 1

    def _failure(
        self, row: BatchRow, attempt: int, e: InfersightError, t0: float, now: float
    ) -> None:
        congestion = is_congestion(e)
        retry_after = getattr(e, "retry_after", None)
        self.ctrl.on_error(
            now, started=t0, kind=e.kind, congestion=congestion, retry_after=retry_after
        )
        self.errors[e.kind] += 1
        if isinstance(e, AuthError):
            self.meter.release(row)
            if self.fatal is None:
                self.fatal, self.stopped = e, "auth"
                self._stopping, self._cancel_at = True, now
            return
        too_long = retry_after is not None and retry_after > self.max_retry_wait
        if (
            e.retryable
            and attempt < self.retry.max_attempts
            and not self._stopping
            and not too_long
        ):
            delay = retry_after if retry_after else self.retry.backoff(attempt)
            heapq.heappush(self._retry, _Retry(now + delay, next(self._seq), row, attempt + 1))
            self.retries += 1
            return
        if self._stopping and e.retryable and attempt < self.retry.max_attempts:
            self.meter.release(row)  # would have been retried: leave it for the rerun
            return
        self.meter.release(row)
        self.writer.add(error_line(row.custom_id, e, quote(row.custom_id, safe="")))
        self.failed += 1
        self.failed_by_kind[e.kind] += 1
