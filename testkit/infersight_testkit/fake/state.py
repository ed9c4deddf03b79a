"""What the fake server holds: its config, counters, scripted faults and slots.

:class:`FakeState` is the base of :class:`~infersight_testkit.fake.openai.FakeOpenAI`:
the endpoints (generation there, the secondary ones in ``extras``) read and
update it; tests read ``stats`` and drive ``set_script``/``reset_stats``.
"""

from __future__ import annotations

import asyncio
import hmac
import random
from typing import Any

from aiohttp import web

from infersight.core.errors import ConfigError
from infersight_testkit.fake.config import Behavior, FakeConfig, parse_behavior
from infersight_testkit.fake.metrics import EngineMetrics
from infersight_testkit.fake.responses import error_response
from infersight_testkit.fake.slots import SlotPool

__all__ = ["FakeState"]


class FakeState:
    """Config, counters (``stats``), the script of behaviours and the slot pool."""

    def __init__(self, config: FakeConfig | None = None) -> None:
        self.config = config or FakeConfig()
        self._script: list[Behavior] = [parse_behavior(b) for b in self.config.script]
        self._closing: asyncio.Event | None = None
        self.pool = SlotPool(self.config.slots, self.config.kv_capacity, self.config.kv_mode)
        if not 0.0 <= self.config.error_rate <= 1.0:
            raise ConfigError("error_rate must be between 0 and 1")
        # Its own stream: the injected errors do not depend on anything else drawn.
        self._error_rng = random.Random(self.config.error_seed)
        self.engine_metrics: EngineMetrics | None = None
        if self.config.metrics_dialect is not None:
            self.engine_metrics = EngineMetrics(self.config, self.pool)
        self.stats: dict[str, Any] = {}
        self.reset_stats()

    def reset_stats(self) -> None:
        self.stats = {
            "requests": 0,
            "by_path": {},
            "statuses": {},
            "in_flight": 0,
            "max_in_flight": 0,
            "auth_failures": 0,
            "client_gone": 0,
            # generation requests answered with error_status by error_rate
            "injected_errors": 0,
            "arrivals": [],
            "embedding_batches": [],
            # The true wait for a slot of every finished generation, and its
            # [arrival, slot start, end] (host monotonic clock), in finishing order.
            "queue_waits": [],
            "timelines": [],
        }

    def set_script(self, script: list[Any]) -> None:
        """Replace the queue of scripted behaviours (one consumed per request)."""
        self._script = [parse_behavior(b) for b in script]

    def _count(self, request: web.Request, status: int) -> None:
        s = self.stats
        s["statuses"][str(status)] = s["statuses"].get(str(status), 0) + 1

    def _inject_error(self) -> bool:
        """Whether this generation request draws an ``error_rate`` error."""
        rate = self.config.error_rate
        if rate <= 0.0 or self._error_rng.random() >= rate:
            return False
        self.stats["injected_errors"] += 1
        return True

    def _check_key(self, request: web.Request) -> web.Response | None:
        key = self.config.api_key
        if key is None:
            return None
        auth = request.headers.get("Authorization", "")
        given = auth[7:] if auth.startswith("Bearer ") else ""
        if given and hmac.compare_digest(given.encode(), key.encode()):
            return None
        self.stats["auth_failures"] += 1
        msg = "Incorrect API key provided." if given else "Missing API key."
        return error_response(401, msg)

    def _behavior(self, request: web.Request) -> Behavior:
        hdr = request.headers.get("X-Fake-Behavior")
        if hdr:
            return parse_behavior(hdr)
        if self._script:
            return self._script.pop(0)
        return Behavior()

    def set_error_rate(self, rate: float, status: int | None = None) -> None:
        """Answer this share of requests (0..1) with an error from now on."""
        self.config.error_rate = rate
        if status is not None:
            self.config.error_status = status
