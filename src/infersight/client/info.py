"""Client calls besides generation: raw GETs, /v1/models, /tokenize, warm-up."""

from __future__ import annotations

import time
from typing import Any

import aiohttp
import orjson

from infersight.client.attempt import simple_call
from infersight.client.keepalive import KeepAlive
from infersight.client.types import Completion, Timeouts
from infersight.core import errors as E

__all__ = ["ServerInfo"]


class ServerInfo:
    """Mixin of Client (it provides the session, URL and credentials)."""

    timeouts: Timeouts
    _headers: dict[str, str]
    _key: str | None
    _key_source: str | None
    _keepalive: KeepAlive

    def _get_session(self) -> aiohttp.ClientSession:
        raise NotImplementedError

    def url(self, path: str) -> str:
        raise NotImplementedError

    async def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        model: str | None = None,
        max_tokens: int | None = None,
        stream: bool = True,
        **extra: Any,
    ) -> Completion:
        raise NotImplementedError

    async def get(self, path: str) -> tuple[int, bytes]:
        """GET any path (``/metrics``, ``/health``...): (status, body) for 2xx and 404;
        other statuses raise a StatusError, transport failures a TransportError."""
        return await self._simple("GET", path)

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
        status, data = await self._simple("GET", path)
        if status == 404:
            raise E.BadRequest(f"HTTP 404 from {self.url(path)}", status=404)
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

    async def warmup(self) -> float:
        """Send one tiny chat request (1 token); return its latency in seconds."""
        c = await self.chat([{"role": "user", "content": "Hi"}], max_tokens=1, stream=False)
        rec = c.record
        start = rec.sent if rec.sent is not None else rec.scheduled
        return (rec.end or time.monotonic()) - start
