"""Map what aiohttp, asyncio and the server say to the infersight error tree.

This is the client's boundary: nothing above it sees an aiohttp exception. HTTP
error bodies are read for the server's own message (OpenAI ``{"error": {...}}``,
FastAPI ``{"detail": ...}`` or plain text); ``Retry-After`` (seconds or HTTP date)
and ``retry-after-ms`` are parsed. The API key is scrubbed from every message.
"""

from __future__ import annotations

import asyncio
import email.utils
import os
import socket
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson

from infersight.client.resend import SentThenDropped
from infersight.core import errors as E

__all__ = [
    "auth_hint",
    "error_from_event",
    "extract_message",
    "is_out_of_memory",
    "map_transport_error",
    "parse_retry_after",
    "scrub",
    "status_error",
]

_MAX_MSG = 500
#: Error bodies are kept up to this size (a proxy passes 4xx bodies through whole).
_MAX_BODY = 16384
#: OpenAI error ``type`` values that imply a status, for error events in a stream.
_TYPE_STATUS = {
    "rate_limit_error": 429,
    "overloaded_error": 503,
    "authentication_error": 401,
    "permission_error": 403,
    "invalid_request_error": 400,
}

#: What engines say when memory runs out (lower case), each from its source:
#: - PyTorch >= 2.1 (c10/cuda/CUDACachingAllocator.cpp): "CUDA out of memory. Tried to
#:   allocate 2.00 GiB. GPU 0 has a total capacity of ...". vLLM (create_error_response
#:   in vllm/entrypoints/openai/engine/serving.py, main@619e4b3, 2026) answers it as 400
#:   BadRequestError, since torch.OutOfMemoryError is a RuntimeError; TGI (router
#:   InferError::GenerationError, 2.x-3.x) as 424 "Request failed during generation:
#:   Server error: CUDA out of memory...".
#: - SGLang (python/sglang/srt/mem_cache/common.py): "Prefill out of memory. Try to
#:   lower your batch size.", "Decode out of memory...", "alloc_req_slots runs out of
#:   memory...", answered as 500 "Internal server error: ..." (serving_base.py).
#: - llama.cpp server (tools/server/server-context.cpp update_slots; in xllamacpp
#:   2026.10): KV cache full at a one-token batch, 500 server_error "Context size has
#:   been exceeded."; builds before 2025: "Input prompt is too big compared to KV size.
#:   Please try increasing KV size."; its log lines "failed to find free space in the
#:   KV cache" / "failed to find a memory slot for batch" when a proxy relays them.
OOM_MARKERS = (
    "out of memory",
    "outofmemoryerror",
    "context size has been exceeded",
    "too big compared to kv size",
    "failed to find free space in the kv cache",
    "failed to find a memory slot",
)


def is_out_of_memory(message: str) -> bool:
    """Whether a server's error message says the engine ran out of memory."""
    low = message.lower()
    return any(m in low for m in OOM_MARKERS)


def scrub(text: str, secret: str | None) -> str:
    """Remove the API key from text a server may have echoed back."""
    if secret and len(secret) >= 4 and secret in text:
        return text.replace(secret, "***")
    return text


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` (preferred, precise) or ``Retry-After``."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            v = float(ms) / 1000.0
            if v >= 0 and v == v:
                return v
        except ValueError:
            pass
    ra = headers.get("Retry-After")
    if not ra:
        return None
    ra = ra.strip()
    try:
        v = float(ra)
        return v if v >= 0 and v == v else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(ra)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def extract_message(body: bytes) -> str:
    """The server's error message from an error body, shortened to one line."""
    text = ""
    try:
        obj: Any = orjson.loads(body) if body else None
    except orjson.JSONDecodeError:
        obj = None
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict):
            msg = err.get("message") or err.get("detail") or err.get("msg")
            text = str(msg) if msg else ""
        elif isinstance(err, str):
            text = err
        if not text and "detail" in obj:
            text = str(obj["detail"])
        if not text and "message" in obj:
            text = str(obj["message"])
    if not text:
        text = body.decode("utf-8", "replace").strip()
    text = " ".join(text.split())
    return text[:_MAX_MSG] + ("..." if len(text) > _MAX_MSG else "")


def auth_hint(status: int, key_sent: bool, key_source: str | None) -> str:
    """Explain a 401/403 without ever showing the key."""
    src = f" (from {key_source})" if key_source else ""
    if status == 403:
        return (
            f"the API key{src} was accepted but is not allowed to use this model or "
            "endpoint; check the key's project, organisation or permissions"
        )
    if not key_sent:
        return (
            "no API key was sent; the server requires one: set it with --api-key-file "
            "or an environment variable such as INFERSIGHT_API_KEY / OPENAI_API_KEY"
        )
    return (
        f"the API key{src} was rejected: it is wrong, expired or revoked, or belongs to "
        "another server; check for a stale value or a key for the wrong endpoint"
    )


def status_error(
    status: int,
    body: bytes,
    headers: Mapping[str, str],
    *,
    url: str,
    request_id: str | None,
    key: str | None,
    key_source: str | None = None,
) -> E.StatusError:
    """An HTTP error answer as the most specific StatusError."""
    server_msg = scrub(extract_message(body), key)
    retry_after = parse_retry_after(headers)
    if status in (401, 403):
        msg = f"HTTP {status} from {url}: {auth_hint(status, key is not None, key_source)}"
        if server_msg:
            msg += f" (server said: {server_msg})"
    else:
        msg = f"HTTP {status} from {url}" + (f": {server_msg}" if server_msg else "")
        if retry_after is not None:
            msg += f" (retry after {retry_after:g} s)"
    kw: dict[str, Any] = {
        "body": scrub(body[:_MAX_BODY].decode("utf-8", "replace"), key),
        "request_id": request_id,
        "retry_after": retry_after,
    }
    if status not in (401, 403, 429) and is_out_of_memory(server_msg):
        # Whatever status the engine chose (vLLM 400, TGI 424, llama.cpp 500).
        return E.OutOfMemory(msg, status=status, **kw)
    return E.error_from_status(status, msg, **kw)


def error_from_event(
    err: Mapping[str, Any], status: int | None, key: str | None
) -> E.InfersightError:
    """An SSE ``error`` event as an infersight error.

    ``code`` (or ``status``) holding an HTTP status maps through error_from_status;
    ``type``/``code`` naming an infersight error kind (as the infersight gateway
    sends, e.g. ``TruncatedStream`` or ``truncated_stream``) maps to that kind;
    anything else is a ServerError.
    """
    message = scrub(" ".join(str(err.get("message") or "error event in stream").split()), key)
    message = f"error event in stream: {message[:_MAX_MSG]}"
    if is_out_of_memory(message):
        return E.OutOfMemory(message, status=status or 0, body=message)
    for key_name in ("type", "code"):
        kind = err.get(key_name)
        if isinstance(kind, str):
            # The kind name itself, or its snake_case form ("truncated_stream").
            name = kind if "_" not in kind else "".join(p.title() for p in kind.split("_"))
            cls = getattr(E, name, None)
            if (
                isinstance(cls, type)
                and issubclass(cls, E.InfersightError)
                and not issubclass(cls, E.StatusError)
                and cls not in (E.ResetError,)
            ):
                return cls(message)
    for key_name in ("code", "status"):
        code = err.get(key_name)
        try:
            code_i = int(code) if code is not None else 0
        except (TypeError, ValueError):
            code_i = 0
        if 400 <= code_i <= 599:
            return E.error_from_status(code_i, message, body=message)
    etype = err.get("type")
    if isinstance(etype, str) and etype in _TYPE_STATUS:
        return E.error_from_status(_TYPE_STATUS[etype], message, body=message)
    return E.ServerError(message, status=status or 0, body=message)


def connect_failure(host: str, port: int | None, err: OSError) -> str:
    """``cannot connect to 127.0.0.1:8000: connection refused``: the address and the
    system's reason, without aiohttp's internals (``ssl:default [Connect call ...]``)."""
    where = f"{host}:{port}" if port else host
    if isinstance(err, socket.gaierror):
        return f"cannot resolve {host} ({(err.strerror or 'unknown host').lower()})"
    if err.errno:
        return f"cannot connect to {where}: {os.strerror(err.errno).lower()}"
    return f"cannot connect to {where}: {err.strerror or 'connection failed'}"


def _host_port(url: str) -> str:
    parts = urlsplit(url)
    return parts.netloc or url


def map_transport_error(exc: BaseException, *, url: str, before_content: bool) -> E.InfersightError:
    """An aiohttp/OS exception as the most specific TransportError.

    ``before_content`` says whether any content had been received; only then may a
    reset be retried.
    """
    if isinstance(exc, E.InfersightError):
        return exc
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, aiohttp.ConnectionTimeoutError):
        return E.ConnectTimeout(f"connecting to {url} timed out")
    if isinstance(exc, aiohttp.ClientConnectorCertificateError | aiohttp.ClientSSLError):
        err = E.ConnectError(
            f"TLS handshake with {url} failed (certificate or TLS setup): {detail}"
        )
        err.retryable = False  # retrying cannot fix a certificate
        return err
    if isinstance(exc, aiohttp.ClientConnectorError | aiohttp.InvalidURL):
        if isinstance(exc, aiohttp.InvalidURL):
            return E.ConfigError(f"invalid URL {url}")
        return E.ConnectError(connect_failure(exc.host, exc.port, exc.os_error))
    if isinstance(
        exc, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError | SentThenDropped
    ):
        where = "before any content" if before_content else "in the middle of the answer"
        return E.ResetError(
            f"{url} closed the connection {where}: {detail}", before_content=before_content
        )
    if isinstance(exc, aiohttp.ServerTimeoutError | asyncio.TimeoutError):
        return E.IdleTimeout(f"read from {url} timed out")
    if isinstance(exc, ConnectionRefusedError):
        return E.ConnectError(f"cannot connect to {_host_port(url)}: connection refused")
    if isinstance(exc, ConnectionResetError | BrokenPipeError | aiohttp.ClientOSError | OSError):
        where = "before any content" if before_content else "in the middle of the answer"
        return E.ResetError(
            f"connection to {url} broke {where}: {detail}", before_content=before_content
        )
    if isinstance(exc, aiohttp.ClientResponseError):
        return E.MalformedStream(f"invalid HTTP response from {url}: {detail}")
    if isinstance(exc, aiohttp.ClientError):
        return E.ReadError(f"request to {url} failed: {detail}")
    return E.ReadError(f"request to {url} failed: {type(exc).__name__}: {detail}")
