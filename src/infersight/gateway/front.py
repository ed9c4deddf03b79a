"""``infersight serve``'s public port: a thin validating front before llama.cpp.

llama.cpp's own HTTP server answers bad input badly: a chat message without ``role``
is a 500; a missing, number-typed or unknown ``model`` and empty ``messages`` are
served; GET on a POST route is a 404; a 20 MB body is parsed in full. The front answers
bad input the way the gateway does (the same validation, :mod:`infersight.gateway.http`,
the same OpenAI error bodies, 413 over ``max_body_bytes``, 405 for a wrong method,
408 after the header/body timeouts) and passes everything else to the engine, which
listens on loopback behind an internal key only the front knows. The answer is relayed
as the engine writes it (see :mod:`infersight.gateway.front_relay`).

It is an asyncio protocol rather than an ``aiohttp.web`` app because it sits on every
request's path: on the 2-core dev box an ``aiohttp.web`` handler alone costs about
140 us of CPU per request, this protocol with aiohttp's C request parser about 50 us
(``benchmarks/serve_front_overhead.py`` measures the whole front against the raw engine).

Routes: POST ``/v1/chat/completions``, ``/v1/completions``, ``/tokenize``,
``/detokenize``; GET ``/v1/models``, ``/health``, ``/metrics``, ``/slots``, ``/props``.
llama.cpp's other endpoints (``/completion``, ``/infill``, ``/slots/{id}`` actions,
``/lora-adapters``, POST ``/props``...) are not exposed. With an API key, every route
except ``/health`` requires it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from infersight.core.errors import InfersightError
from infersight.core.httpguard import GuardSettings
from infersight.core.listen import listen_error
from infersight.gateway.auth import KeyStore
from infersight.gateway.config import KeyConfig, hash_key
from infersight.gateway.errors import InputError
from infersight.gateway.front_checks import check_llama_chat, check_llama_tokens
from infersight.gateway.front_conn import ClientConn
from infersight.gateway.front_http import Head
from infersight.gateway.front_relay import EnginePool
from infersight.gateway.http import model_not_found, parse_body, validate

__all__ = ["FrontConfig", "ServeFront", "run_front"]

log = logging.getLogger("infersight.serve")

_POST = {
    "/v1/chat/completions": "chat",
    "/v1/completions": "completions",
    "/tokenize": "tokenize",
    "/detokenize": "detokenize",
}
_GET = frozenset({"/v1/models", "/health", "/metrics", "/slots", "/props"})
_OPEN = frozenset({"/health"})


@dataclass(frozen=True)
class FrontConfig:
    """Where the front listens, the engine behind it, and its limits."""

    engine_host: str
    engine_port: int
    engine_key: str = field(repr=False)
    #: The model id the engine serves; requests for any other are 404.
    model: str
    host: str = "127.0.0.1"
    port: int = 0
    #: The key clients must send (None: open access).
    api_key: str | None = field(default=None, repr=False)
    max_body_bytes: int = 8 * 1024 * 1024
    #: Head, body and keep-alive timeouts and the per-address connection cap: the
    #: limits the gateway's servers apply (one definition, core.httpguard).
    guard: GuardSettings = field(default_factory=GuardSettings)


class ServeFront:
    """The validating front; ``start()`` listens, ``stop()`` closes everything."""

    def __init__(self, cfg: FrontConfig) -> None:
        self.cfg = cfg
        self.loop = asyncio.get_running_loop()
        keys = [KeyConfig(name="default", sha256=hash_key(cfg.api_key))] if cfg.api_key else []
        self.keys = KeyStore(keys)
        self.pool = EnginePool(cfg.engine_host, cfg.engine_port)
        self._up_head = (
            f"Host: {cfg.engine_host}:{cfg.engine_port}\r\n"
            f"Authorization: Bearer {cfg.engine_key}\r\n"
        ).encode("latin-1")
        self.conns: set[ClientConn] = set()
        self._per_peer: Counter[str] = Counter()
        #: Refusals by error code (what the front answered itself).
        self.refused: Counter[str] = Counter()
        self._server: asyncio.Server | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self.port: int | None = None

    @property
    def url(self) -> str:
        host = self.cfg.host
        if host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    # -- lifecycle -----------------------------------------------------------------------------
    async def start(self) -> None:
        """Listen; raise ConfigError (one line) when the address cannot be used."""
        try:
            self._server = await self.loop.create_server(
                lambda: ClientConn(self), self.cfg.host, self.cfg.port, backlog=1024,
                reuse_address=True,
            )
        except OSError as e:
            raise listen_error(self.cfg.host, self.cfg.port, e) from None
        self.port = int(self._server.sockets[0].getsockname()[1])
        self._sweeper = self.loop.create_task(self._sweep())

    async def stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self._server is not None:
            self._server.close()
            for c in list(self.conns):
                c.close()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._server.wait_closed(), 5.0)
            self._server = None
        self.pool.close()

    async def _sweep(self) -> None:
        c = self.cfg
        g = c.guard
        tick = max(0.05, min(1.0, g.head_timeout_s / 4, g.body_timeout_s / 4,
                             g.idle_timeout_s / 4))
        while True:
            await asyncio.sleep(tick)
            now = self.loop.time()
            for conn in list(self.conns):
                conn.check_timeouts(now)

    def admit(self, conn: ClientConn) -> bool:
        """Count a new connection against its address's cap."""
        cap = self.cfg.guard.max_connections_per_client
        if cap and self._per_peer[conn.peer] >= cap:
            self.refused["too_many_connections"] += 1
            return False
        self._per_peer[conn.peer] += 1
        self.conns.add(conn)
        return True

    def forget(self, conn: ClientConn) -> None:
        if conn in self.conns:
            self.conns.discard(conn)
            self._per_peer[conn.peer] -= 1
            if self._per_peer[conn.peer] <= 0:
                del self._per_peer[conn.peer]

    # -- one request -------------------------------------------------------------------------
    def check_head(self, head: Head) -> InfersightError | None:
        """A refusal decided from the head alone (route, method, key, size), or None."""
        try:
            self._route(head)
            self._check_head(head)
        except InfersightError as e:
            self.refused[getattr(e, "code", e.kind)] += 1
            return e
        return None

    @staticmethod
    def allow_header(e: InfersightError, head: Head) -> dict[str, str] | None:
        """``Allow`` for a 405."""
        if isinstance(e, InputError) and e.status == 405:
            return {"Allow": "POST" if head.path in _POST else "GET"}
        return None

    def _route(self, head: Head) -> None:
        path = head.path
        want = "POST" if path in _POST else ("GET" if path in _GET else None)
        if want is None:
            raise InputError(f"no such endpoint: {head.method} {path[:200]}",
                             code="not_found", status=404)
        if head.method != want:
            raise InputError(f"{path} accepts {want}, not {head.method}",
                             code="method_not_allowed", status=405)

    def _check_head(self, head: Head) -> None:
        if head.path not in _OPEN:
            self.keys.authenticate(head.headers.get("authorization"))
        enc = (head.headers.get("content-encoding") or "identity").lower()
        if enc not in ("", "identity"):
            raise InputError(f"compressed request bodies ({enc[:40]}) are not accepted",
                             code="unsupported_media_type", status=415)
        expect = head.headers.get("expect")
        if expect is not None and expect.lower() != "100-continue":
            raise InputError(f"unsupported Expect: {expect[:100]}",
                             code="expectation_failed", status=417)
        if head.length > self.cfg.max_body_bytes:
            raise InputError(f"request body exceeds {self.cfg.max_body_bytes} bytes",
                             code="body_too_large", status=413)

    def _validate(self, endpoint: str, body: bytes) -> None:
        doc = parse_body(body)
        if endpoint in ("chat", "completions"):
            model, _ = validate(endpoint, doc)
            if model != self.cfg.model:
                raise model_not_found(model, "this server", [self.cfg.model])
            if endpoint == "chat":
                check_llama_chat(doc)
        else:
            check_llama_tokens(endpoint, doc)

    def on_request(self, conn: ClientConn, head: Head, body: bytes) -> None:
        """A whole request that passed :meth:`check_head`: refuse it or relay it."""
        endpoint = _POST.get(head.path)
        if endpoint is None:
            # GET: the path and query as sent (the head parser allowed visible ASCII only).
            conn.relay(b"GET " + head.target.encode("ascii") + b" HTTP/1.1\r\n"
                       + self._up_head + b"\r\n", head)
            return
        try:
            self._validate(endpoint, body)
        except InfersightError as e:
            self.refused[getattr(e, "code", e.kind)] += 1
            conn.answered(e, head)
            return
        conn.relay(b"".join((
            b"POST ", head.path.encode("ascii"), b" HTTP/1.1\r\n", self._up_head,
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body), body,
        )), head)


def run_front(
    cfg: FrontConfig,
    *,
    on_ready: Callable[[ServeFront], object],
    alive: Callable[[], bool],
) -> int | None:
    """Serve until SIGINT/SIGTERM (returns the signal number) or until ``alive()`` turns
    false (returns None), with uvloop when available."""
    received: list[int] = []

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_signal(signum: int) -> None:
            received.append(signum)
            stop.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal, sig)
        front = ServeFront(cfg)
        await front.start()
        try:
            on_ready(front)
            while not stop.is_set() and alive():
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(stop.wait(), 0.5)
        finally:
            await front.stop()

    runner: Callable[[Any], object] = asyncio.run
    with contextlib.suppress(ImportError):  # uvloop is a dependency on Linux/macOS
        import uvloop

        runner = uvloop.run
    runner(main())
    return received[0] if received else None
