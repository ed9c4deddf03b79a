"""The async OpenAI-compatible client every infersight part uses.

One aiohttp session with a pooled keep-alive connector per Client. Each request gets
one absolute deadline across all its attempts; retries follow docs/design.md section 3
and happen only before content reached the caller. Every request fills a
:class:`~infersight.core.records.RequestRecord`; failures raise the most specific
InfersightError with that record attached as ``.record``.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import os
import time
from collections.abc import Mapping
from typing import Any, TypedDict, Unpack

import orjson

from infersight.client.attempt import send_attempt
from infersight.client.base import BaseClient
from infersight.client.iterate import drain
from infersight.client.retry import RetryPolicy, run_with_retries
from infersight.client.stream import StreamResponse, fail_record, mark_cancelled
from infersight.client.types import Completion, Timeouts
from infersight.core import errors as E
from infersight.core.records import RequestRecord

__all__ = ["Client", "RequestOptions"]


class RequestOptions(TypedDict, total=False):
    """The per-request keywords of :meth:`Client.request` and :meth:`Client.stream`."""

    scheduled: float | None
    deadline: float | None
    request_id: str | None
    headers: Mapping[str, str] | None
    record: RequestRecord | None
    #: Replace the client's own timeouts and retry policy for this request.
    timeouts: Timeouts | None
    retry: RetryPolicy | None


_REQUEST_KWARGS = tuple(RequestOptions.__annotations__)


def _new_id_source() -> None:
    """Request ids: a random per-process prefix and a counter (32 hex digits, like a
    uuid4's hex), unique across processes at a fraction of uuid4's cost."""
    global _ID_PREFIX, _ID_COUNTER
    _ID_PREFIX = os.urandom(8).hex()
    _ID_COUNTER = itertools.count()


_ID_PREFIX = ""
_ID_COUNTER = itertools.count()
_new_id_source()
os.register_at_fork(after_in_child=_new_id_source)


def new_request_id() -> str:
    """A fresh request id (32 hex digits), unique across processes."""
    return f"{_ID_PREFIX}{next(_ID_COUNTER):016x}"


class Client(BaseClient):
    """Async client for OpenAI-compatible servers (vLLM, SGLang, llama.cpp, TGI, OpenAI).

    ``base_url`` is the server root (``http://host:port``); a trailing ``/v1`` is
    accepted too. Use as ``async with Client(url) as c: await c.chat(...)``.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeouts: Timeouts | None = None,
        retry: RetryPolicy | None = None,
        max_connections: int = 0,
        headers: Mapping[str, str] | None = None,
        model: str | None = None,
        api_key_source: str | None = None,
        usage_per_chunk: bool = False,
        timings_per_token: bool = False,
    ) -> None:
        super().__init__(
            base_url,
            api_key=api_key,
            timeouts=timeouts,
            max_connections=max_connections,
            headers=headers,
            api_key_source=api_key_source,
        )
        self.retry = retry or RetryPolicy()
        self.model = model
        # vLLM's continuous_usage_stats: every chunk carries the usage so far, so a
        # chunk that carries several tokens is counted as such. Only for servers known
        # to take it: another server may refuse an unknown stream option.
        self._usage_options = {"include_usage": True}
        if usage_per_chunk:
            self._usage_options["continuous_usage_stats"] = True
        # llama.cpp's timings_per_token: every chunk carries timings.predicted_n, the
        # tokens so far; llama.cpp holds a token back until its UTF-8 is whole, so a
        # chunk may carry several.
        self._timings_per_token = timings_per_token
        # Per-request headers start from these (built once, copied per request).
        self._hdrs_plain = {**self._headers, "Content-Type": "application/json"}
        self._hdrs_sse = {**self._hdrs_plain, "Accept": "text/event-stream"}

    async def __aenter__(self) -> Client:
        self._get_session()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- retries -----------------------------------------------------------------
    async def _open(
        self,
        path: str,
        body: Mapping[str, Any],
        *,
        scheduled: float | None = None,
        deadline: float | None = None,
        request_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        record: RequestRecord | None = None,
        timeouts: Timeouts | None = None,
        retry: RetryPolicy | None = None,
    ) -> StreamResponse:
        now = time.monotonic()
        if record is None:
            record = RequestRecord(
                request_id or new_request_id(), now if scheduled is None else scheduled
            )
        else:
            if request_id:
                record.request_id = request_id
            if scheduled is not None:
                record.scheduled = scheduled
        rec = record
        limits = timeouts or self.timeouts
        if deadline is None:
            total = limits.total
            deadline = now + total if total is not None else math.inf
        stream = body.get("stream")
        if stream:
            so = body.get("stream_options")
            if not (so.__class__ is dict and "include_usage" in so):
                body = {**body, "stream_options": {**(so or {}), **self._usage_options}}
            if self._timings_per_token and "timings_per_token" not in body:
                body = {**body, "timings_per_token": True}
        try:
            payload = orjson.dumps(body)
        except TypeError as e:
            raise fail_record(
                rec, E.ConfigError(f"request body is not JSON-serialisable: {e}")
            ) from None
        hdrs = {**(self._hdrs_sse if stream else self._hdrs_plain), "X-Request-Id": rec.request_id}
        if headers:
            hdrs.update(headers)
        url = self.url(path)
        policy = retry or self.retry
        budget = policy.budget
        if budget is not None:
            budget.deposit(now)
        session = self._get_session()

        async def attempt() -> StreamResponse:
            return await send_attempt(
                session,
                url,
                payload,
                hdrs,
                rec,
                deadline,
                timeouts=limits,
                key=self._key,
                key_source=self._key_source,
                keepalive=self._keepalive,
                streamed=bool(stream),
            )

        try:
            return await run_with_retries(attempt, policy, rec, deadline, url)
        except E.InfersightError as e:
            raise fail_record(rec, e) from None
        except asyncio.CancelledError:
            mark_cancelled(rec)
            raise

    # -- public API --------------------------------------------------------------
    async def request(
        self, path: str, body: dict[str, Any], **options: Unpack[RequestOptions]
    ) -> Completion:
        """Send one request (streamed when ``body["stream"]``) and read it to the end;
        ``timeouts`` and ``retry`` replace the client's own for this request."""
        sr = await self._open(path, body, **options)
        await drain(sr)
        return sr.completion()

    def stream(
        self, path: str, body: dict[str, Any], **options: Unpack[RequestOptions]
    ) -> _Streaming:
        """Open a response; enters once the first content arrived (retries happen before).

        After entering there is no retry: errors raise from ``events()`` or
        ``raw_chunks()``. Leaving the block before the end drops the connection and
        marks the record cancelled. ``timeouts`` and ``retry`` replace the client's own
        for this request.
        """
        return _Streaming(self, path, body, options)

    def _body(
        self,
        key: str,
        value: Any,
        model: str | None,
        max_tokens: int | None,
        stream: bool,
        extra: dict[str, Any],
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        kw = {k: extra.pop(k) for k in _REQUEST_KWARGS if k in extra}
        body: dict[str, Any] = {key: value, "stream": stream}
        m = model or self.model
        if m is not None:
            body["model"] = m
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        body.update(extra)
        return body, kw

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        model: str | None = None,
        max_tokens: int | None = None,
        stream: bool = True,
        **extra: Any,
    ) -> Completion:
        """POST /v1/chat/completions. ``extra`` goes into the body, except the
        request() keywords (scheduled, deadline, request_id, headers, record,
        timeouts, retry)."""
        body, kw = self._body("messages", messages, model, max_tokens, stream, extra)
        return await self.request("/v1/chat/completions", body, **kw)

    async def complete(
        self,
        prompt: str | list[Any],
        *,
        model: str | None = None,
        max_tokens: int | None = None,
        stream: bool = True,
        **extra: Any,
    ) -> Completion:
        """POST /v1/completions (a prompt string, or a list for a batch)."""
        body, kw = self._body("prompt", prompt, model, max_tokens, stream, extra)
        return await self.request("/v1/completions", body, **kw)

    async def warmup(self) -> float:
        """Send one tiny chat request (1 token); return its latency in seconds."""
        c = await self.chat([{"role": "user", "content": "Hi"}], max_tokens=1, stream=False)
        rec = c.record
        start = rec.sent if rec.sent is not None else rec.scheduled
        return (rec.end or time.monotonic()) - start


class _Streaming:
    """``async with client.stream(...) as sr``: opens on enter, closes on exit.

    (A plain class: cheaper than a generator-based context manager on a hot path.)
    """

    __slots__ = ("_body", "_client", "_options", "_path", "_sr")

    def __init__(
        self, client: Client, path: str, body: dict[str, Any], options: RequestOptions
    ) -> None:
        self._client = client
        self._path = path
        self._body = body
        self._options = options
        self._sr: StreamResponse | None = None

    async def __aenter__(self) -> StreamResponse:
        self._sr = await self._client._open(self._path, self._body, **self._options)
        return self._sr

    async def __aexit__(self, *exc: object) -> None:
        if self._sr is not None:
            self._sr.close()
