"""Engine scraper: fetches an engine's Prometheus ``/metrics`` (vLLM, SGLang, TGI,
llama.cpp or the infersight gateway) and normalises it (see :mod:`.engines`).

Besides the engine's own metrics every round yields ``engine.up`` (1 or 0) and
``engine.scrape_duration_seconds``; ``engine.slots`` comes from the engine's metrics
when it exports a limit, else from its info endpoint (``/props`` for llama.cpp), else
from the ``slots=`` argument.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

import aiohttp

from infersight.client import map_transport_error
from infersight.core.endpoint import server_root
from infersight.core.errors import ConfigError, MalformedStream
from infersight.core.numbers import number_at
from infersight.core.records import Sample
from infersight.telemetry.engine_metrics import Normalizer, engine_specs

__all__ = ["EngineScraper", "metrics_url"]

log = logging.getLogger(__name__)

#: Seconds between retries of a slot-limit probe that failed.
_SLOT_RETRY_S = 30.0


def metrics_url(url: str) -> str:
    """``http://host:port`` or ``.../v1`` -> ``http://host:port/metrics``; a URL that
    already names a path other than /v1 is kept as given."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ConfigError(f"not an http(s) URL: {url!r}")
    path = parts.path.rstrip("/")
    if not server_root(path):  # the root, or the OpenAI base URL (/v1)
        path = "/metrics"
    return urlunsplit((parts.scheme, parts.netloc, path, parts.query, ""))


class EngineScraper:
    """Scrape one engine's /metrics each round and normalise it.

    ``engine`` forces the name map ("vllm", "sglang", "tgi", "llamacpp",
    "infersight"); by default it is detected from the metric names. ``buckets`` keeps
    the engine's histogram buckets in the samples (the exporter re-exports them).
    """

    name = "engine"

    def __init__(
        self,
        url: str,
        *,
        engine: str | None = None,
        timeout: float = 2.0,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        slots: int | None = None,
        buckets: bool = False,
    ) -> None:
        if engine is not None and engine not in engine_specs():
            known = ", ".join(sorted(engine_specs()))
            raise ConfigError(f"unknown engine {engine!r}; known: {known}")
        self.url = metrics_url(url)
        p = urlsplit(self.url)
        self.base_url = urlunsplit((p.scheme, p.netloc, "", "", ""))
        self.timeout = timeout
        self._headers = dict(headers or {})
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._normalizer = Normalizer(engine, source=self.url, buckets=buckets)
        self._slots_arg = slots
        self._slots: int | None = slots
        self._slots_next_try = 0.0
        self._session: aiohttp.ClientSession | None = None
        #: The last error message (None while scrapes succeed).
        self.last_error: str | None = None

    @property
    def engine(self) -> str | None:
        """The detected (or forced) engine id, once known."""
        return self._normalizer.engine

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=self.timeout),
                headers=self._headers,
            )
        return self._session

    async def fetch_text(self) -> str:
        """GET the metrics text; raises aiohttp/asyncio errors or MalformedStream."""
        async with self._get_session().get(self.url) as resp:
            if resp.status != 200:
                raise MalformedStream(f"HTTP {resp.status} from {self.url}")
            return await resp.text()

    async def sample(self) -> list[Sample]:
        t0 = time.monotonic()
        base = {"engine": self.engine or "unknown", "source": self.url}
        try:
            text = await self.fetch_text()
            out = self._normalizer.normalize_text(text, t0)
        except (TimeoutError, aiohttp.ClientError, OSError, MalformedStream) as e:
            # "cannot connect to HOST:PORT: connection refused", not aiohttp's internals
            msg = str(map_transport_error(e, url=self.url, before_content=True))
            if msg != self.last_error:
                log.warning("scrape of %s failed: %s", self.url, msg)
            self.last_error = msg
            return [Sample(t0, "engine.up", 0.0, base)]
        self.last_error = None
        base = {"engine": self.engine or "unknown", "source": self.url}
        dt = time.monotonic() - t0
        out.append(Sample(t0, "engine.up", 1.0, dict(base)))
        out.append(Sample(t0, "engine.scrape_duration_seconds", dt, dict(base)))
        if not any(s.name == "engine.slots" for s in out):
            slots = await self._slot_limit()
            out.append(Sample(t0, "engine.slots", slots, dict(base)))
        return out

    async def _slot_limit(self) -> int | None:
        if self._slots is not None or self._slots_arg is not None:
            return self._slots
        spec = self._normalizer.spec
        now = time.monotonic()
        if spec is None or not spec.slots or now < self._slots_next_try:
            return None
        self._slots_next_try = now + _SLOT_RETRY_S
        for path, field in spec.slots:
            try:
                async with self._get_session().get(self.base_url + path) as resp:
                    if resp.status != 200:
                        continue
                    doc = await resp.json(content_type=None)
            except (TimeoutError, aiohttp.ClientError, OSError, ValueError):
                continue
            # "#count": the number of entries of a JSON list (llama.cpp's /slots)
            v = (
                (len(doc) if isinstance(doc, list) else None)
                if field == "#count"
                else number_at(doc, *field.split("."))
            )
            if v is not None and v > 0:
                self._slots = int(v)
                return self._slots
        return None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
