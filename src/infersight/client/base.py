"""The client's connection side: pool, credentials, URLs and the server's own endpoints.

:class:`BaseClient` owns what every call shares (one aiohttp session with a pooled
keep-alive connector, the API key, default headers, what is known about the server's
keep-alive) and the calls besides generation: raw GETs, ``/v1/models`` and
``/tokenize``. :class:`~infersight.client.Client` adds generation on top.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import aiohttp
import orjson

from infersight.client.attempt import simple_call
from infersight.client.errors_map import extract_message
from infersight.client.keepalive import KeepAlive
from infersight.client.resend import ResendConnector
from infersight.client.types import Timeouts
from infersight.core import errors as E

__all__ = ["BaseClient"]


class BaseClient:
    """Session, credentials and URL of one server, plus its non-generation endpoints.

    ``base_url`` is the server root (``http://host:port``); a trailing ``/v1`` is
    accepted too.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeouts: Timeouts | None = None,
        max_connections: int = 0,
        headers: Mapping[str, str] | None = None,
        api_key_source: str | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise E.ConfigError(f"base URL must start with http:// or https://: {base_url!r}")
        if max_connections < 0:
            raise E.ConfigError(
                f"max_connections must be >= 0 (0 = unlimited), got {max_connections}"
            )
        self.base_url = base_url.rstrip("/")
        self.timeouts = timeouts or Timeouts()
        self.max_connections = max_connections
        self._key = api_key
        self._key_source = api_key_source
        self._headers: dict[str, str] = dict(headers or {})
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._session: aiohttp.ClientSession | None = None
        self._keepalive = KeepAlive()

    @property
    def closes_after_stream(self) -> str | None:
        """Why the client believes its server closes the connection after each
        streamed answer (then such connections are not reused), or None."""
        return self._keepalive.closes_after_stream

    def __repr__(self) -> str:  # never shows the key
        return f"{type(self).__name__}({self.base_url!r}, api_key={'***' if self._key else None})"

    # -- lifecycle ---------------------------------------------------------------
    def _get_session(self) -> aiohttp.ClientSession:
        s = self._session
        if s is None or s.closed:
            # Resends (only when provably unsent) and retries (the policy) are the
            # client's: see client.resend.
            connector = ResendConnector(
                limit=self.max_connections, limit_per_host=0, keepalive_timeout=60.0
            )
            s = self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.timeouts.connect),
                auto_decompress=True,
                raise_for_status=False,
            )
        return s

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    def url(self, path: str) -> str:
        if self.base_url.endswith("/v1") and path.startswith("/v1/"):
            return self.base_url + path[3:]
        return self.base_url + (path if path.startswith("/") else "/" + path)

    # -- the server's own endpoints ------------------------------------------------
    async def get(self, path: str) -> tuple[int, bytes]:
        """GET any path (``/metrics``, ``/health``...): (status, body) for 2xx and 404;
        other statuses raise a StatusError, transport failures a TransportError."""
        return await self._simple("GET", path)

    async def post(self, path: str, body: Any) -> tuple[int, bytes]:
        """POST a JSON body to any path (``/tokenize``...): (status, body) as :meth:`get`."""
        return await self._simple("POST", path, body)

    async def _simple(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        return await simple_call(
            self._get_session(),
            method,
            self.url(path),
            headers=self._headers,
            body=body,
            total=self.timeouts.total,
            key=self._key,
            key_source=self._key_source,
            keepalive=self._keepalive,
        )

    async def get_json(self, path: str) -> Any:
        """GET a JSON document, with typed errors (404 -> BadRequest)."""
        return await self._json("GET", path)

    async def put_json(self, path: str, body: Any) -> Any:
        """PUT a JSON body and read the JSON answer, with typed errors (404 ->
        BadRequest), e.g. the gateway's ``/upstreams/{name}/limit``."""
        return await self._json("PUT", path, body)

    async def _json(self, method: str, path: str, body: Any = None) -> Any:
        status, data = await self._simple(method, path, body)
        if status == 404:
            msg = extract_message(data) if body is not None else ""
            raise E.BadRequest(
                f"HTTP 404 from {self.url(path)}" + (f": {msg}" if msg else ""), status=404
            )
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            raise E.MalformedStream(f"{self.url(path)} did not answer JSON") from None

    async def models(self) -> list[str]:
        """The model ids the server lists at /v1/models."""
        doc = await self.get_json("/v1/models")
        data = doc.get("data") if isinstance(doc, dict) else None
        if not isinstance(data, list):
            return []
        return [str(m["id"]) for m in data if isinstance(m, dict) and "id" in m]

    async def tokenize(self, text: str) -> list[int] | None:
        """Token ids from the server's /tokenize (llama.cpp, vLLM); None if it has none."""
        status, data = await self._simple("POST", "/tokenize", {"content": text, "prompt": text})
        if status == 404:
            return None
        try:
            doc = orjson.loads(data)
        except orjson.JSONDecodeError:
            return None
        toks = doc.get("tokens") if isinstance(doc, dict) else None
        if not isinstance(toks, list):
            return None
        return [int(t["id"]) if isinstance(t, dict) else int(t) for t in toks]
