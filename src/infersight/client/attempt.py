"""One HTTP attempt, up to its first content, with every failure typed."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import math
import time
import weakref
from collections.abc import Mapping
from typing import Any

import aiohttp
import orjson

from infersight.client.errors_map import map_transport_error, status_error
from infersight.client.stream import StreamResponse
from infersight.client.types import Timeouts
from infersight.core import errors as E
from infersight.core.records import RequestRecord

__all__ = ["TimedRequest", "send_attempt", "simple_call"]

#: The record of the request this task is sending (read by TimedRequest.send).
_sending: contextvars.ContextVar[RequestRecord | None] = contextvars.ContextVar(
    "infersight_sending", default=None
)


#: Set per attempt: TimedRequest.send writes whether it went out on a pooled connection.
_reused: contextvars.ContextVar[list[bool] | None] = contextvars.ContextVar(
    "infersight_reused", default=None
)
#: Connections (their protocol objects) that have carried a request already.
_used_protocols: weakref.WeakSet[Any] = weakref.WeakSet()


class TimedRequest(aiohttp.ClientRequest):
    """aiohttp's request, stamping the record's ``sent`` as it starts writing.

    ``send`` runs once the connection is ready (so connecting is not counted), right
    before the request line and headers are written. The record comes through a
    context variable set by :func:`send_attempt` in the same task; this costs far
    less than aiohttp's tracing signals, which it replaces. Only the first attempt
    stamps ``sent`` (design.md section 2: schedule lag is the client's own delay).
    """

    async def send(self, conn: Any) -> aiohttp.ClientResponse:
        rec = _sending.get()
        if rec is not None and rec.sent is None:
            rec.sent = time.monotonic()
        proto = conn.protocol
        if proto is not None:
            flag = _reused.get()
            if flag is not None:
                flag[0] = proto in _used_protocols
            _used_protocols.add(proto)
        return await super().send(conn)


async def _post(
    session: aiohttp.ClientSession, url: str, payload: bytes, headers: Mapping[str, str]
) -> aiohttp.ClientResponse:
    """POST, sent again at once if a pooled connection turns out to be stale.

    A server may close an idle keep-alive connection just as we reuse it (llama.cpp's
    server closes after every streamed answer although it offers keep-alive). The
    request then fails before any answer, and the server never processed it, so it is
    sent once more on a fresh connection, as browsers and urllib3 do. This is not a
    retry of the request: it costs no attempt and no retry budget.
    """
    flag = [False]
    token = _reused.set(flag)
    try:
        try:
            return await session.post(url, data=payload, headers=headers)
        except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError):
            if not flag[0]:
                raise
        flag[0] = False
        return await session.post(url, data=payload, headers=headers)
    finally:
        _reused.reset(token)


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
) -> StreamResponse:
    """Send one attempt; return once its first content (or its end) has arrived.

    Raises typed errors: ConnectError/ConnectTimeout/ResetError before the headers,
    a StatusError for an HTTP error answer, FirstTokenTimeout or DeadlineExceeded.
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
    token = _sending.set(rec)
    try:
        async with asyncio.timeout_at(loop.time() + (due - t0) if due < math.inf else None):
            resp = await _post(session, url, payload, headers)
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
    except TimeoutError as e:
        if resp is not None:
            resp.close()
        if isinstance(e, aiohttp.ConnectionTimeoutError):
            raise E.ConnectTimeout(f"connecting to {url} timed out") from None
        if isinstance(e, aiohttp.ServerTimeoutError):
            raise map_transport_error(e, url=url, before_content=True) from None
        if ft_due <= deadline:
            raise E.FirstTokenTimeout(
                f"no answer from {url} within the first-token limit ({ft:g} s)"
            ) from None
        raise E.DeadlineExceeded(f"the request to {url} passed its deadline") from None
    except E.InfersightError:
        if resp is not None:
            resp.close()
        raise
    except (aiohttp.ClientError, OSError) as e:
        if resp is not None:
            resp.close()
        raise map_transport_error(e, url=url, before_content=True) from None
    except BaseException:
        if resp is not None:
            resp.close()
        raise
    finally:
        _sending.reset(token)
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
    )
    await sr._prime()
    return sr


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
) -> tuple[int, bytes]:
    """One request without retries or record (GET /v1/models, /tokenize...).

    Returns (status, body) for 2xx and 404; other statuses raise a StatusError.
    """
    try:
        async with asyncio.timeout(total):
            async with session.request(
                method,
                url,
                headers=headers,
                data=orjson.dumps(body) if body is not None else None,
            ) as resp:
                data = await resp.read()
                if resp.status >= 300 and resp.status != 404:
                    raise status_error(
                        resp.status,
                        data,
                        resp.headers,
                        url=url,
                        request_id=None,
                        key=key,
                        key_source=key_source,
                    )
                return resp.status, data
    except TimeoutError as e:
        if isinstance(e, aiohttp.ConnectionTimeoutError):
            raise E.ConnectTimeout(f"connecting to {url} timed out") from None
        raise E.DeadlineExceeded(f"{method} {url} passed its deadline") from None
    except (aiohttp.ClientError, OSError) as e:
        raise map_transport_error(e, url=url, before_content=True) from None
