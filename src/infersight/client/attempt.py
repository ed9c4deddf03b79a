"""One HTTP attempt, up to its first content, with every failure typed."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Mapping
from typing import Any

import aiohttp
import orjson

from infersight.client.errors_map import map_transport_error, status_error
from infersight.client.iterate import prime
from infersight.client.keepalive import KeepAlive
from infersight.client.resend import open_response
from infersight.client.stream import StreamResponse
from infersight.client.types import Timeouts
from infersight.core import errors as E
from infersight.core.records import RequestRecord

__all__ = ["send_attempt", "simple_call"]


async def send_attempt(
    session: aiohttp.ClientSession,
    url: str,
    payload: bytes,
    headers: Mapping[str, str],
    rec: RequestRecord,
    deadline: float,
    *,
    timeouts: Timeouts,
    key: str | None,
    key_source: str | None,
    keepalive: KeepAlive,
    streamed: bool = True,
) -> StreamResponse:
    """Send one attempt; return once its first content (or its end) has arrived.

    Raises typed errors: ConnectError/ConnectTimeout/ResetError before the headers,
    a StatusError for an HTTP error answer, FirstTokenTimeout or DeadlineExceeded.
    For a non-streamed request (``streamed`` False) the first-token limit ends at the
    response head, its first byte; the idle limit then bounds each gap in the body.
    """
    t0 = time.monotonic()
    # The record describes the final attempt: forget what an earlier one received.
    rec.status = None
    rec.headers = None
    ft = timeouts.first_token
    ft_due = t0 + ft if ft is not None else math.inf
    due = min(ft_due, deadline)
    loop = asyncio.get_running_loop()
    resp: aiohttp.ClientResponse | None = None
    try:
        async with asyncio.timeout_at(loop.time() + (due - t0) if due < math.inf else None):
            resp = await open_response(
                session, "POST", url, data=payload, headers=headers, rec=rec, keepalive=keepalive
            )
            sid = _note_head(rec, resp)
            if resp.status >= 300:
                try:
                    body = await resp.read()
                except (aiohttp.ClientError, OSError):
                    body = b""
                raise status_error(
                    resp.status,
                    body,
                    resp.headers,
                    url=url,
                    request_id=sid or rec.request_id,
                    key=key,
                    key_source=key_source,
                )
    except BaseException as e:
        if resp is not None:
            resp.close()
        typed = _head_error(e, url, ft if ft_due <= deadline else None)
        if typed is None:
            raise
        raise typed from None
    sr = StreamResponse(
        resp,
        rec,
        url=url,
        sent_at=t0,
        first_token=ft,
        idle=timeouts.idle,
        deadline=deadline,
        key=key,
        loop=loop,
        streamed=streamed,
    )
    await prime(sr)
    return sr


def _note_head(rec: RequestRecord, resp: aiohttp.ClientResponse) -> str | None:
    """Fill the record from the response head; return the server's request id."""
    rec.headers = time.monotonic()
    rec.status = resp.status
    rh = resp.headers
    sid = rh.get("X-Request-Id")
    if sid is not None:
        rec.server_request_id = sid
    qd = rh.get("X-Queue-Delay")
    if qd is not None:
        with contextlib.suppress(ValueError):
            rec.queue_delay = float(qd) / 1000.0
    return sid


def _head_error(e: BaseException, url: str, first_token: float | None) -> E.InfersightError | None:
    """The typed error for a failure before the response head was read, or None when
    ``e`` is raised as it is (already typed, or a cancellation). ``first_token`` is
    the first-token limit when it, not the deadline, bounded the wait."""
    if isinstance(e, TimeoutError):
        if isinstance(e, aiohttp.ConnectionTimeoutError):
            return E.ConnectTimeout(f"connecting to {url} timed out")
        if isinstance(e, aiohttp.ServerTimeoutError):
            return map_transport_error(e, url=url, before_content=True)
        if first_token is not None:
            return E.FirstTokenTimeout(
                f"no answer from {url} within the first-token limit ({first_token:g} s)"
            )
        return E.DeadlineExceeded(f"the request to {url} passed its deadline")
    if isinstance(e, E.InfersightError):
        return None
    if isinstance(e, aiohttp.ClientError | OSError):
        return map_transport_error(e, url=url, before_content=True)
    return None


async def simple_call(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    *,
    headers: Mapping[str, str],
    body: Any = None,
    total: float | None,
    key: str | None,
    key_source: str | None,
    keepalive: KeepAlive,
) -> tuple[int, bytes]:
    """One request without retries or record (GET /v1/models, /tokenize...).

    Returns (status, body) for 2xx and 404; other statuses raise a StatusError.
    """
    data = orjson.dumps(body) if body is not None else None
    if data is not None:
        # vLLM refuses a body of any other media type (400), llama.cpp reads it either way.
        headers = {**headers, "Content-Type": "application/json"}
    try:
        async with asyncio.timeout(total):
            resp = await open_response(
                session, method, url, data=data, headers=headers, rec=None, keepalive=keepalive
            )
            async with resp:
                answer = await resp.read()
                if resp.status >= 300 and resp.status != 404:
                    raise status_error(
                        resp.status,
                        answer,
                        resp.headers,
                        url=url,
                        request_id=None,
                        key=key,
                        key_source=key_source,
                    )
                return resp.status, answer
    except TimeoutError as e:
        if isinstance(e, aiohttp.ConnectionTimeoutError):
            raise E.ConnectTimeout(f"connecting to {url} timed out") from None
        raise E.DeadlineExceeded(f"{method} {url} passed its deadline") from None
    except (aiohttp.ClientError, OSError) as e:
        raise map_transport_error(e, url=url, before_content=True) from None
