"""A configurable OpenAI-compatible server for tests and benchmarks.

It streams like a real engine (role chunk, one content chunk per token, a
finish_reason chunk, a usage-only chunk when asked, ``[DONE]``) at a chosen TTFT and
inter-token latency, and injects the faults of :mod:`infersight_testkit.fake.config`.
It also serves ``/v1/models``, ``/v1/embeddings`` (deterministic vectors, batch
input), ``/tokenize``, ``/health``, and its own counters at ``GET /_fake/stats``.
With ``slots`` it models an engine with N generation slots and a FIFO queue (each
request's true wait is in the stats), and ``metrics_dialect`` serves ``/metrics`` with
vLLM's, SGLang's, TGI's or llama.cpp's own metric names (see ``slots`` and ``metrics``).

    async with FakeOpenAI(FakeConfig(ttft=0.05)).running() as srv:   # same loop
        srv.base_url
    with FakeOpenAI.subprocess(FakeConfig(itl=0)) as srv:           # own process
        srv.base_url, srv.stats()

Run standalone: ``python -m infersight_testkit.fake.openai --port 8001 --ttft 0.1``
(``--slots 4 --metrics-dialect vllm`` for an engine that queues).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import orjson
from aiohttp import web

from infersight_testkit.fake.config import Behavior, FakeConfig
from infersight_testkit.fake.extras import ExtraEndpoints
from infersight_testkit.fake.faults import garbage_answer, oom_answer, stalled_json
from infersight_testkit.fake.prefill import PrefillBatches
from infersight_testkit.fake.process import FakeProcess
from infersight_testkit.fake.responses import (
    RequestShape,
    error_response,
    json_response,
    request_shape,
)
from infersight_testkit.fake.slots import record_timeline
from infersight_testkit.fake.stream import stream_answer

__all__ = ["FakeConfig", "FakeOpenAI"]

#: ttft, itl, prompt tokens, completion tokens, finish reason of one answer.
_Gen = tuple[float, float, int, int, str]

_SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


class FakeOpenAI(ExtraEndpoints):
    """The fake server. ``stats`` counts what it received (see ``GET /_fake/stats``)."""

    def __init__(self, config: FakeConfig | None = None) -> None:
        super().__init__(config)
        # The origin of ``FakeConfig.drift``.
        self._born = time.monotonic()
        self.prefill = PrefillBatches()
        self.base_url = ""
        self.port = 0

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        r = app.router
        r.add_post("/v1/chat/completions", self._generate)
        r.add_post("/v1/completions", self._generate)
        r.add_post("/v1/embeddings", self._embeddings)
        r.add_get("/v1/models", self._models)
        r.add_get("/health", self._health)
        r.add_post("/tokenize", self._tokenize)
        r.add_get("/_fake/stats", self._stats)
        r.add_post("/_fake/script", self._set_script)
        r.add_post("/_fake/reset", self._reset)
        r.add_post("/_fake/errors", self._set_errors)
        if self.engine_metrics is not None:
            r.add_get("/metrics", self._metrics)
        if self.config.metrics_dialect is not None:
            # where infersight reads each engine's slot limit (engines.toml "slots")
            info = {"llamacpp": "/props", "sglang": "/get_server_info", "tgi": "/info"}
            path = info.get(self.config.metrics_dialect)
            if path is not None:
                r.add_get(path, self._props)
        return app

    @contextlib.asynccontextmanager
    async def running(self, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[FakeOpenAI]:
        """Serve on this event loop until the block exits."""
        self._closing = asyncio.Event()
        # Like the engines (vLLM, llama.cpp), stop working on a request whose client
        # hung up: aiohttp cancels the handler.
        runner = web.AppRunner(
            self.app(), access_log=None, shutdown_timeout=0.5, handler_cancellation=True
        )
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        self.port = int(runner.addresses[0][1])
        self.base_url = f"http://{host}:{self.port}"
        try:
            yield self
        finally:
            self._closing.set()
            await runner.cleanup()

    @staticmethod
    @contextlib.contextmanager
    def subprocess(
        config: FakeConfig | None = None, *, startup_timeout: float = 30.0
    ) -> Iterator[FakeProcess]:
        """Serve from a separate Python process (clean timing); stopped on exit."""
        proc = FakeProcess(config or FakeConfig(), startup_timeout=startup_timeout)
        try:
            yield proc
        finally:
            proc.close()

    # -- helpers -----------------------------------------------------------------
    async def _hang(self) -> None:
        assert self._closing is not None
        await self._closing.wait()

    # -- endpoints ---------------------------------------------------------------
    async def _generate(self, request: web.Request) -> web.StreamResponse:
        s = self.stats
        s["requests"] += 1
        s["by_path"][request.path] = s["by_path"].get(request.path, 0) + 1
        arrival = time.monotonic()
        s["arrivals"].append(arrival)
        del s["arrivals"][:-1000]
        s["in_flight"] += 1
        s["max_in_flight"] = max(s["max_in_flight"], s["in_flight"])
        em = self.engine_metrics
        if em is not None:
            em.arrived()
        try:
            resp = await self._generate_inner(request, arrival)
            self._count(request, resp.status)
            if em is not None and resp.status >= 400:
                em.failed_with(resp.status)
            return resp
        except ConnectionResetError:
            # The client left (a timeout, a cancelled test): nothing to answer.
            s["client_gone"] += 1
            if em is not None:
                em.abort()
            return web.Response(status=499)
        except asyncio.CancelledError:
            s["client_gone"] += 1  # it hung up while we worked (handler cancelled)
            raise
        finally:
            s["in_flight"] -= 1

    async def _generate_inner(self, request: web.Request, arrival: float) -> web.StreamResponse:
        denied = self._check_key(request)
        if denied is not None:
            return denied
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return error_response(400, "request body is not JSON")
        if not isinstance(body, dict):
            return error_response(400, "request body must be a JSON object")
        b = self._behavior(request)
        cfg = self.config
        if cfg.max_concurrency is not None and self.stats["in_flight"] > cfg.max_concurrency:
            return error_response(429, "too many concurrent requests", {"Retry-After": "1"})
        if self._inject_error():
            # error_rate: answered at once, before the queue, with no Retry-After
            return error_response(cfg.error_status, f"fake error {cfg.error_status}")
        if b.hang:
            await self._hang()
        if b.delay:
            await asyncio.sleep(b.delay)
        if b.reset:
            if request.transport is not None:
                request.transport.abort()
            return web.Response(status=500)
        if b.garbage:
            return garbage_answer(request, b.garbage)
        rid = request.headers.get("X-Request-Id") or uuid.uuid4().hex
        headers = {"X-Request-Id": rid}
        if b.oom:
            return oom_answer(b.oom, headers)
        if cfg.queue_delay_ms is not None:
            headers["X-Queue-Delay"] = f"{cfg.queue_delay_ms:g}"
        if b.status is not None and b.error_after is None:
            if b.retry_after is not None:
                headers["Retry-After"] = b.retry_after
            if b.retry_after_ms is not None:
                headers["retry-after-ms"] = f"{b.retry_after_ms:g}"
            if b.body is not None:
                return json_response(b.body, b.status, headers)
            return error_response(b.status, b.message or f"fake error {b.status}", headers)
        if cfg.front_delay > 0:
            # The engine's HTTP front (parse, template, tokenize): not yet in its queue.
            await asyncio.sleep(cfg.front_delay)
        chat = request.path.endswith("/chat/completions")
        shape = request_shape(body, chat, b.tokens if b.tokens is not None else cfg.tokens)
        # The KV tokens it holds while it runs: its prompt and its whole answer
        # (reserved at admission), or on demand its prompt, then what it makes.
        on_demand = cfg.kv_mode == "on_demand" and bool(body.get("stream"))
        need = shape.prompt_tokens + (0 if on_demand else shape.tokens * len(shape.prompts))
        queued = time.monotonic()
        # The engine's queue: wait for a slot (FIFO) before the first byte of the answer.
        holder = [await self.pool.acquire(need)]
        start = time.monotonic()

        async def step(tokens: int) -> float:
            # on-demand KV: the tokens of one step; a preempted request comes back
            # after its wait and recomputes what it had (a prefill of that many tokens)
            h = await self.pool.grow(holder[0], tokens)
            if h is holder[0]:
                return 0.0
            holder[0] = h
            return (cfg.ttft + cfg.prefill_per_token * h.recompute) * self._pace()

        try:
            resp, gen = await self._answer(
                request, body, b, headers, shape, step if on_demand else None
            )
        finally:
            self.pool.release(holder[0])
        end = time.monotonic()
        record_timeline(self.stats, arrival, start, end)
        if self.engine_metrics is not None:
            ttft, itl, prompt, tokens, finish = gen
            self.engine_metrics.observe(
                queue=start - queued,
                ttft=start - arrival + ttft,
                itl=itl,
                e2e=end - arrival,
                prompt=prompt,
                tokens=tokens,
                finish=finish,
            )
        return resp

    async def _answer(
        self,
        request: web.Request,
        body: dict[str, Any],
        b: Behavior,
        headers: dict[str, str],
        shape: RequestShape,
        step: Callable[[int], Awaitable[float]] | None = None,
    ) -> tuple[web.StreamResponse, _Gen]:
        """Generate the answer (holding a slot): JSON, or a stream; and its figures."""
        cfg = self.config
        chat = request.path.endswith("/chat/completions")
        prompts, prompt_tokens, n, finish = shape
        first = b.ttft if b.ttft is not None else cfg.ttft
        # Prefill: the first step also reads the prompt (paced like the rest of it).
        own = cfg.prefill_per_token * prompt_tokens
        itl = b.itl if b.itl is not None else cfg.itl
        slower = 1.0 + cfg.drift * (time.monotonic() - self._born) if cfg.drift else 1.0
        ttft = (first + own) * slower
        if cfg.batch_prefill:
            # the prompt's first token comes when its group's prefill step ends; the
            # stream then owes no first step of its own
            pace = self._pace() * slower
            ttft = await self.prefill.join(first=first * pace, per_prompt=own * pace, window=itl)
        # What the engine's counters need once the answer is done.
        gen: _Gen = (ttft, itl, prompt_tokens, n * len(prompts), finish)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": n * len(prompts) + cfg.usage_offset,
            "total_tokens": prompt_tokens + n * len(prompts) + cfg.usage_offset,
        }
        base = {
            "id": f"{'chatcmpl' if chat else 'cmpl'}-{headers['X-Request-Id'][:16]}",
            "object": "chat.completion.chunk" if chat else "text_completion",
            "created": int(time.time()),
            "model": body.get("model") or cfg.model,
        }
        due = 0.0 if cfg.batch_prefill else ttft  # what is still to wait for it
        if not body.get("stream"):
            await asyncio.sleep((due + itl * max(0, n - 1)) * self._pace())
            text = cfg.token_text * n
            choices = [
                {
                    "index": i,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": finish,
                }
                if chat
                else {"index": i, "text": text, "finish_reason": finish, "logprobs": None}
                for i in range(len(prompts))
            ]
            obj = "chat.completion" if chat else "text_completion"
            doc = {**base, "object": obj, "choices": choices, "usage": usage}
            if b.body_stall:
                return await stalled_json(request, doc, headers, b.body_stall), gen
            return json_response(doc, headers=headers), gen

        so = body.get("stream_options")
        want_usage = cfg.include_usage == "always" or (
            cfg.include_usage == "auto" and isinstance(so, dict) and bool(so.get("include_usage"))
        )
        streamed = await stream_answer(
            request,
            b,
            cfg,
            base=base,
            headers={**headers, **_SSE_HEADERS, "Content-Type": cfg.sse_content_type},
            chat=chat,
            n=n,
            n_prompts=len(prompts),
            ttft=due,
            itl=itl,
            finish=finish,
            usage=usage if want_usage else None,
            pace=self._pace,
            usage_per_chunk=isinstance(so, dict) and bool(so.get("continuous_usage_stats")),
            step=step,
            timings_per_token=body.get("timings_per_token") is True,
        )
        return streamed, gen

    def _pace(self) -> float:
        """How much slower a step runs now: ``running / compute_knee`` past the knee."""
        knee = self.config.compute_knee
        return max(1.0, self.pool.running / knee) if knee else 1.0

    async def _metrics(self, request: web.Request) -> web.Response:
        assert self.engine_metrics is not None
        return web.Response(
            body=self.engine_metrics.render(),
            headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"},
        )

    async def _props(self, request: web.Request) -> web.Response:
        # llama.cpp's /props, SGLang's /get_server_info, TGI's /info: the slot limit.
        slots = self.config.slots or 1
        doc = {
            "/props": {"total_slots": slots, "model_path": self.config.model},
            "/get_server_info": {"max_running_requests": slots, "model_path": self.config.model},
            "/info": {"max_batch_size": slots, "model_id": self.config.model},
        }
        return json_response(doc[request.path])


if __name__ == "__main__":
    from infersight_testkit.fake.process import main

    main(server=FakeOpenAI)
