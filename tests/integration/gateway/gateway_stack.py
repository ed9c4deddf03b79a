"""Helpers for gateway tests: a gateway in front of fake upstreams, all on 127.0.0.1."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
from multidict import CIMultiDict
from prometheus_client.parser import text_string_to_metric_families

from infersight.gateway import Gateway, load_config
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI

CHAT = {"model": "fake", "messages": [{"role": "user", "content": "hello there"}]}


class Stack:
    """A running gateway plus its fake upstreams and an HTTP session."""

    def __init__(self, gw: Gateway, fakes: list[FakeOpenAI], session: aiohttp.ClientSession):
        self.gw = gw
        self.fakes = fakes
        self.session = session
        #: The key sent to /metrics (with keys configured, it needs one).
        self.admin_key: str | None = None

    @property
    def url(self) -> str:
        return self.gw.url

    async def post(
        self, path: str, body: Any, headers: dict[str, str] | None = None
    ) -> tuple[int, CIMultiDict[str], bytes]:
        async with self.session.post(self.url + path, json=body, headers=headers) as r:
            return r.status, CIMultiDict(r.headers), await r.read()

    async def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of ``name`` whose labels include ``labels``."""
        auth = {"Authorization": f"Bearer {self.admin_key}"} if self.admin_key else None
        async with self.session.get(self.url + "/metrics", headers=auth) as r:
            assert r.status == 200, await r.text()
            return metric_sum(await r.text(), name, **labels)


def metric_sum(text: str, name: str, **labels: str) -> float:
    """Sum of the samples of ``name`` in a /metrics text whose labels include ``labels``."""
    total = 0.0
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total


StackFactory = Callable[..., contextlib.AbstractAsyncContextManager[Stack]]


def stack_factory() -> StackFactory:
    """``async with make_stack([FakeConfig(...), ...], upstreams=[{...}], **cfg) as s``.

    Each fake gets an upstream named a, b, c... serving model "fake" unless
    ``upstreams`` (a list of dicts merged into those defaults) says otherwise.
    A string instead of a FakeConfig is used as the upstream URL as is.
    """

    @contextlib.asynccontextmanager
    async def factory(
        fakes: list[FakeConfig | str],
        upstreams: list[dict[str, Any]] | None = None,
        **cfg: Any,
    ) -> AsyncIterator[Stack]:
        async with contextlib.AsyncExitStack() as stack:
            servers: list[FakeOpenAI] = []
            ups: list[dict[str, Any]] = []
            for i, f in enumerate(fakes):
                if isinstance(f, str):
                    url = f
                else:
                    srv = await stack.enter_async_context(FakeOpenAI(f).running())
                    servers.append(srv)
                    url = srv.base_url
                up: dict[str, Any] = {
                    "name": "abcdefgh"[i],
                    "url": url,
                    "models": ["fake"],
                    "max_attempts": 1,
                }
                if upstreams and i < len(upstreams):
                    up.update(upstreams[i])
                ups.append(up)
            config = load_config(None, port=0, upstreams=ups, **cfg)
            gw = await stack.enter_async_context(Gateway(config).running())
            session = await stack.enter_async_context(aiohttp.ClientSession())
            yield Stack(gw, servers, session)

    return factory
