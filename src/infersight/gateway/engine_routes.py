"""The embedded llama.cpp engine behind the gateway (``infersight serve``): its own
endpoints and its request checks.

An upstream marked ``embedded`` is the llama.cpp engine infersight started, on a
private loopback port with a key only the gateway holds. The gateway then serves what
``serve`` promises besides the OpenAI API, with the gateway's key and limits:

- ``POST /tokenize`` and ``/detokenize``, their bodies checked first
  (:func:`~infersight.core.request_checks.check_llama_tokens`: a token id beyond the
  vocabulary is a 400, where llama.cpp answers 500);
- ``GET /slots`` and ``/props``, as the engine answers them;
- the engine's ``llamacpp:*`` metrics in ``/metrics``, before the gateway's own;
- chat bodies checked where llama.cpp is narrower than the API
  (:func:`~infersight.core.request_checks.check_llama_chat`), and no
  ``/v1/embeddings`` (it serves none).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Protocol

import orjson
from aiohttp import web

from infersight.core.errors import InfersightError
from infersight.core.request_checks import check_llama_chat, check_llama_tokens
from infersight.gateway.call import own_headers
from infersight.gateway.error_answers import error_response
from infersight.gateway.public import mark
from infersight.gateway.request_body import parse_body
from infersight.gateway.request_guard import Handler, read_body

if TYPE_CHECKING:
    from infersight.gateway.listener import ClientLimits
    from infersight.gateway.upstream import Upstream

__all__ = ["EngineRoutes", "GatewayView"]


class GatewayView(Protocol):
    """What the routes use of their :class:`infersight.gateway.server.Gateway` (a
    protocol here, so that the server and its routes do not import each other)."""

    upstreams: list[Upstream]
    limits: ClientLimits

    def key_needed(self, request: web.Request) -> web.StreamResponse | None: ...


log = logging.getLogger("infersight.gateway")


class EngineRoutes:
    """The embedded engine's endpoints on one gateway."""

    #: The OpenAI endpoints the engine serves.
    endpoints = frozenset({"chat", "completions"})

    def __init__(self, gateway: GatewayView, upstream: Upstream) -> None:
        self.gw = gateway
        self.up = upstream
        #: The model's vocabulary size (from the engine's /v1/models), once known.
        self.n_vocab: int | None = None

    @classmethod
    def of(cls, gateway: GatewayView) -> EngineRoutes | None:
        """The routes of the gateway's embedded upstream, or None when it has none."""
        ups = [u for u in gateway.upstreams if u.cfg.embedded]
        return cls(gateway, ups[0]) if ups else None

    def routes(self) -> dict[str, dict[str, Handler]]:
        return {
            "/tokenize": {"POST": self.tokenize},
            "/detokenize": {"POST": self.detokenize},
            "/slots": {"GET": self.slots},
            "/props": {"GET": self.props},
        }

    def check(self, endpoint: str, model: str, body: dict[str, Any]) -> None:
        """llama.cpp's own limits on a chat body for a model the engine serves."""
        if endpoint == "chat" and self.up.serves(model):
            check_llama_chat(body)

    async def metrics_text(self) -> bytes:
        """The engine's /metrics (empty, logged, when it does not answer)."""
        try:
            status, data = await self._client().get("/metrics")
        except InfersightError as e:
            log.warning("the engine's /metrics did not answer: %s", e.kind)
            return b""
        return data if status == 200 else b""

    async def _vocab(self) -> int | None:
        if self.n_vocab is None:
            doc = await self._client().get_json("/v1/models")
            for m in doc.get("data") or () if isinstance(doc, dict) else ():
                n = (m.get("meta") or {}).get("n_vocab") if isinstance(m, dict) else None
                if isinstance(n, int) and n > 0:
                    self.n_vocab = n
        return self.n_vocab

    def _client(self) -> Any:
        client = self.up.client
        assert client is not None
        return client

    # -- handlers ---------------------------------------------------------------------
    async def tokenize(self, request: web.Request) -> web.StreamResponse:
        return await self._post(request, "tokenize")

    async def detokenize(self, request: web.Request) -> web.StreamResponse:
        return await self._post(request, "detokenize")

    async def slots(self, request: web.Request) -> web.StreamResponse:
        return await self._get(request, "/slots")

    async def props(self, request: web.Request) -> web.StreamResponse:
        return await self._get(request, "/props")

    async def _post(self, request: web.Request, endpoint: str) -> web.StreamResponse:
        if (denied := self.gw.key_needed(request)) is not None:
            return denied
        try:
            doc = parse_body(await read_body(request, self.gw.limits))
            n_vocab = await self._vocab() if endpoint == "detokenize" else None
            check_llama_tokens(endpoint, doc, n_vocab)
            status, data = await self._call(self._client().post("/" + endpoint, doc))
        except InfersightError as e:
            return self._refuse(e)
        return self._answer(status, data)

    async def _get(self, request: web.Request, path: str) -> web.StreamResponse:
        if (denied := self.gw.key_needed(request)) is not None:
            return denied
        try:
            status, data = await self._call(self._client().get(path))
        except InfersightError as e:
            return self._refuse(e)
        return self._answer(status, data)

    async def _call(self, call: Any) -> tuple[int, bytes]:
        try:
            result: tuple[int, bytes] = await call
        except InfersightError as e:
            mark(e, self.up.name)  # told by the upstream's name, never its URL
            raise
        return result

    def _refuse(self, e: InfersightError) -> web.Response:
        headers = own_headers()
        return error_response(e, headers["X-Request-Id"])

    @staticmethod
    def _answer(status: int, data: bytes) -> web.Response:
        try:
            orjson.loads(data)
        except orjson.JSONDecodeError:
            data = orjson.dumps(
                {
                    "error": {
                        "message": "the engine's answer was not JSON",
                        "type": "server_error",
                        "code": "bad_gateway",
                        "param": None,
                    }
                }
            )
            status = 502
        return web.Response(
            status=status, body=data, content_type="application/json", headers=own_headers()
        )
