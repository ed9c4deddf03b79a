"""The one exception tree shared by the client, bench, gateway and batch.

It follows ``docs/design.md`` section 3. Transport errors (nothing or only part of
an exchange happened on the wire) are kept apart from status errors (the server
answered with an HTTP error) and from protocol errors (the server answered, but the
stream was not valid). Third-party exceptions are mapped to the most specific type
here at the boundary where they are caught, so callers never see an aiohttp or
asyncio exception.

Every error has a stable ``kind`` (its class name) used in records, metrics and
reports, and an OpenAI-style ``type``/``code`` pair used by the gateway's error body.
Messages never contain API keys.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from infersight.core.request_record import RequestRecord

__all__ = [
    "AuthError",
    "BadRequest",
    "Cancelled",
    "ConfigError",
    "ConnectError",
    "ConnectTimeout",
    "DataError",
    "DeadlineExceeded",
    "FirstTokenTimeout",
    "IdleTimeout",
    "InfersightError",
    "InvalidRequest",
    "LaunchError",
    "MalformedStream",
    "OutOfMemory",
    "Overloaded",
    "ProtocolError",
    "RateLimited",
    "ReadError",
    "ResetError",
    "ServerError",
    "StatusError",
    "Timeout",
    "TransportError",
    "TruncatedStream",
    "error_from_status",
    "file_error",
    "read_user_file",
]


class InfersightError(Exception):
    """Base of every error infersight raises on purpose."""

    #: OpenAI-style error ``type`` used in HTTP error bodies.
    openai_type: str = "api_error"
    #: Whether the retry policy may try again (docs/design.md section 3).
    retryable: bool = False

    def __init__(self, message: str = "") -> None:
        super().__init__(message)
        self.message = message or self.__class__.__doc__ or self.__class__.__name__
        #: The request's filled timing record, when the error ended a request.
        self.record: RequestRecord | None = None

    @property
    def kind(self) -> str:
        """The stable name of this error kind, as stored in request records."""
        return type(self).__name__

    def __str__(self) -> str:
        return self.message


class ConfigError(InfersightError):
    """Bad flags, files or environment; raised before any request is sent."""

    openai_type = "invalid_request_error"


class DataError(InfersightError):
    """Values that cannot be measurements (NaN, infinite, badly weighted) were given
    to a computation; nothing is computed from them."""


class LaunchError(InfersightError):
    """A server that ``tune`` launched did not come up: it exited at once, found its
    port taken, or was not healthy in time (``reason``: "exited", "port_taken",
    "start_timeout"). An engine that says it ran out of memory while starting is an
    :class:`OutOfMemory` instead."""

    def __init__(
        self, message: str = "", *, reason: str = "exited", exit_code: int | None = None
    ) -> None:
        super().__init__(message)
        self.reason = reason
        #: The launched process's exit status, when it exited.
        self.exit_code = exit_code


class Cancelled(InfersightError):
    """The request was cancelled by the user (Ctrl-C) before it completed."""


class TransportError(InfersightError):
    """The exchange failed on the wire."""


class ConnectError(TransportError):
    """The connection could not be opened; nothing was sent, so a retry is safe."""

    retryable = True


class ReadError(TransportError):
    """The connection broke after the request was sent."""


class ResetError(ReadError):
    """The peer reset or closed the connection after the request was sent."""

    def __init__(self, message: str = "", *, before_content: bool = True) -> None:
        super().__init__(message)
        #: True when no content had been received; only then is a retry allowed.
        self.before_content = before_content
        self.retryable = before_content


class Timeout(TransportError):
    """A time limit was exceeded."""

    openai_type = "timeout"


class ConnectTimeout(Timeout):
    """Opening the connection took longer than the connect timeout."""

    retryable = True


class FirstTokenTimeout(Timeout):
    """No content arrived before the first-token (TTFT) limit."""


class IdleTimeout(Timeout):
    """The gap between two stream chunks exceeded the idle limit."""


class DeadlineExceeded(Timeout):
    """The request's one overall deadline passed (across retries and failover)."""


class StatusError(InfersightError):
    """The server answered with an HTTP error status."""

    def __init__(
        self,
        message: str = "",
        *,
        status: int = 0,
        body: str = "",
        request_id: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.body = body
        self.request_id = request_id
        #: Seconds the server asked us to wait (Retry-After / retry-after-ms), if any.
        self.retry_after = retry_after
        self.retryable = status in RETRYABLE_STATUSES


class AuthError(StatusError):
    """401/403: the API key is missing, a placeholder, wrong or expired. Never retried."""

    openai_type = "authentication_error"


class RateLimited(StatusError):
    """429: the server asks the client to slow down."""

    openai_type = "rate_limit_error"


class Overloaded(StatusError):
    """503: the server is overloaded or unavailable."""

    openai_type = "overloaded_error"


class ServerError(StatusError):
    """A 5xx answer other than 503."""


class OutOfMemory(ServerError):
    """The engine ran out of device memory or KV-cache room for this request.

    Engines say it in their own words and with their own statuses (PyTorch's "CUDA
    out of memory", vLLM's 400/500 bodies, SGLang's "Prefill/Decode out of memory",
    TGI's 424 generation error, llama.cpp's 500 "Context size has been exceeded."); the
    client maps them all here. It means memory pressure, like a 503 means overload:
    back off, try another replica, and size the engine (``diagnose``'s verdict).
    """

    def __init__(self, message: str = "", **kw: Any) -> None:
        super().__init__(message, **kw)
        # Memory frees as running requests finish: worth another try, as a 503 is.
        self.retryable = True


class BadRequest(StatusError):
    """A 4xx answer other than 401/403/429: the request itself is wrong. Never retried."""

    openai_type = "invalid_request_error"


class InvalidRequest(BadRequest):
    """A request this process refuses before sending it anywhere: a field of the wrong
    type or value (:mod:`infersight.core.request_checks`), a route, a size. Carries the
    OpenAI error's ``param`` and ``code``; its kind stays ``BadRequest``."""

    def __init__(
        self,
        message: str,
        param: str | None = None,
        code: str = "invalid_request",
        status: int = 400,
    ) -> None:
        super().__init__(message, status=status)
        self.param = param
        self.code = code

    @property
    def kind(self) -> str:
        return "BadRequest"


class ProtocolError(InfersightError):
    """The server answered, but not with a valid OpenAI response or stream."""


class MalformedStream(ProtocolError):
    """Bad SSE framing or invalid JSON in an event."""


class TruncatedStream(ProtocolError):
    """The stream ended without ``[DONE]`` or a ``finish_reason``; never a success."""


#: Statuses the retry policy may retry (docs/design.md section 3).
RETRYABLE_STATUSES = frozenset({408, 429, 502, 503, 504})


def error_from_status(
    status: int,
    message: str,
    *,
    body: str = "",
    request_id: str | None = None,
    retry_after: float | None = None,
) -> StatusError:
    """Map an HTTP error status to the most specific :class:`StatusError`."""
    cls: type[StatusError]
    if status in (401, 403):
        cls = AuthError
    elif status == 429:
        cls = RateLimited
    elif status == 503:
        cls = Overloaded
    elif status >= 500:
        cls = ServerError
    else:
        cls = BadRequest
    return cls(message, status=status, body=body, request_id=request_id, retry_after=retry_after)


def file_error(path: object, e: OSError, what: str = "") -> ConfigError:
    """The one line for a file the user named that cannot be read:
    ``[what ]path: cannot read (why)``, e.g. ``price table p.toml: cannot read (no such file)``."""
    if isinstance(e, FileNotFoundError):
        why = "no such file"
    elif isinstance(e, IsADirectoryError):
        why = "it is a directory"
    else:
        why = e.strerror or str(e)
    return ConfigError(f"{what + ' ' if what else ''}{path}: cannot read ({why})")


def read_user_file(path: str | Path, what: str = "") -> bytes:
    """The bytes of a file the user named; :func:`file_error`'s one line if unreadable."""
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise file_error(path, e, what) from None
