"""The fake server's secondary endpoints: embeddings, models, tokenize, health, and
its own control endpoints (``/_fake/stats``, ``/_fake/script``, ``/_fake/reset``,
``/_fake/errors``)."""

from __future__ import annotations

import asyncio
import hashlib
import math
import struct
from typing import Any

import orjson
from aiohttp import web

from infersight_testkit.fake.responses import count_words, error_response, json_response
from infersight_testkit.fake.state import FakeState

__all__ = ["ExtraEndpoints"]


class ExtraEndpoints(FakeState):
    """Everything the fake serves besides generation (FakeOpenAI adds that)."""

    async def _embeddings(self, request: web.Request) -> web.Response:
        s = self.stats
        s["requests"] += 1
        s["by_path"][request.path] = s["by_path"].get(request.path, 0) + 1
        denied = self._check_key(request)
        if denied is not None:
            return denied
        body = orjson.loads(await request.read())
        inp = body.get("input", "")
        items = inp if isinstance(inp, list) and inp and not isinstance(inp[0], int) else [inp]
        s["embedding_batches"].append(len(items))
        del s["embedding_batches"][:-1000]
        cfg = self.config
        await asyncio.sleep(cfg.embed_base + cfg.embed_per_item * len(items))
        data = [
            {"object": "embedding", "index": i, "embedding": self.vector(item)}
            for i, item in enumerate(items)
        ]
        toks = sum(count_words(i) if isinstance(i, str) else len(i) for i in items)
        return json_response(
            {
                "object": "list",
                "data": data,
                "model": body.get("model") or cfg.model,
                "usage": {"prompt_tokens": toks, "total_tokens": toks},
            }
        )

    def vector(self, item: Any) -> list[float]:
        """The deterministic unit vector the server returns for one input."""
        seed = orjson.dumps(item)
        dim = self.config.embedding_dim
        raw = b""
        counter = 0
        while len(raw) < 4 * dim:
            raw += hashlib.blake2b(seed + struct.pack("<I", counter)).digest()
            counter += 1
        vals = [v / 2**31 - 1.0 for v in struct.unpack(f"<{dim}I", raw[: 4 * dim])]
        norm = math.sqrt(sum(v * v for v in vals)) or 1.0
        return [v / norm for v in vals]

    async def _models(self, request: web.Request) -> web.Response:
        return json_response(
            {
                "object": "list",
                "data": [
                    {
                        "id": self.config.model,
                        "object": "model",
                        "created": 0,
                        "owned_by": "infersight-fake",
                    }
                ],
            }
        )

    async def _health(self, request: web.Request) -> web.Response:
        return json_response({"status": "ok"})

    async def _tokenize(self, request: web.Request) -> web.Response:
        if not self.config.tokenize:
            raise web.HTTPNotFound()
        if request.content_type != "application/json":
            # As vLLM: a body of any other media type is refused.
            return error_response(400, "Only 'application/json' is allowed")
        body = orjson.loads(await request.read())
        text = str(body.get("content") or body.get("prompt") or "")
        toks = [
            int.from_bytes(hashlib.blake2b(w.encode(), digest_size=2).digest(), "little")
            for w in text.split()
        ]
        return json_response({"tokens": toks})

    async def _stats(self, request: web.Request) -> web.Response:
        return json_response({**self.stats, **self.pool.gauges(), "script_left": len(self._script)})

    async def _set_script(self, request: web.Request) -> web.Response:
        script = orjson.loads(await request.read())
        self.set_script(script if isinstance(script, list) else [script])
        return json_response({"script_left": len(self._script)})

    async def _set_errors(self, request: web.Request) -> web.Response:
        """``{"rate": 0.5, "status": 503}``: the share of requests that fail from now on."""
        doc = orjson.loads(await request.read())
        rate, status = doc.get("rate"), doc.get("status")
        if (
            not isinstance(rate, int | float)
            or not 0.0 <= rate <= 1.0
            or not (status is None or isinstance(status, int))
        ):
            raise web.HTTPBadRequest(text="rate must be a number in [0, 1], status an int")
        self.set_error_rate(float(rate), status)
        return json_response({"error_rate": self.config.error_rate})

    async def _reset(self, request: web.Request) -> web.Response:
        self.reset_stats()
        self._script = []
        return json_response({"ok": True})
