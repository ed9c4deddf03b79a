"""Gateway-side refinements of the shared error tree (core/errors.py).

They subclass the shared classes and keep their ``kind`` (so records, metrics and
reports see the usual names) but carry what the gateway's HTTP answer needs: the
OpenAI ``code`` and ``param``, and whether the gateway itself refused the request.
"""

from __future__ import annotations

from infersight.core.errors import AuthError, BadRequest, InvalidRequest, Overloaded, RateLimited

__all__ = [
    "ClientFault",
    "InputError",
    "KeyRefused",
    "KeyThrottled",
    "MalformedRequest",
    "Shed",
    "SlowClient",
]


class InputError(InvalidRequest):
    """The client's request is invalid (400, 404 or 413); never sent upstream."""

    @property
    def kind(self) -> str:
        return "InvalidRequest"


class ClientFault(BadRequest):
    """The client's HTTP itself is at fault, not what it asks for: the connection is
    closed after the answer."""

    status_code = 400

    def __init__(self, message: str) -> None:
        super().__init__(message, status=self.status_code)

    @property
    def kind(self) -> str:
        return "BadRequest"


class SlowClient(ClientFault):
    """The client took longer than the head or body time limit (408)."""

    code = "request_timeout"
    status_code = 408


class MalformedRequest(ClientFault):
    """The request's HTTP framing is invalid or ambiguous (400)."""

    code = "malformed_request"


class KeyRefused(AuthError):
    """The gateway refused the client's API key (401)."""

    code = "invalid_api_key"

    @property
    def kind(self) -> str:
        return "AuthError"


class KeyThrottled(RateLimited):
    """A gateway key is over its request or token rate limit, or its budget (429)."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 429,
        retry_after: float | None = None,
        code: str = "rate_limit_exceeded",
    ) -> None:
        super().__init__(message, status=status, retry_after=retry_after)
        self.code = code

    @property
    def kind(self) -> str:
        return "RateLimited"


class Shed(Overloaded):
    """The gateway shed the request (queue full, predicted wait, no upstream): 503."""

    def __init__(self, message: str, *, code: str, retry_after: float | None = None) -> None:
        super().__init__(message, status=503, retry_after=retry_after)
        self.code = code

    @property
    def kind(self) -> str:
        return "Overloaded"
