"""Each adaptive law behind the other feature's interface, for `adaptive_controllers.py`.

- :class:`GradientForBatch`: the gateway's gradient law (``GradientLimit``) as a batch
  ``ConcurrencyController``. It keeps the batch runner's bookkeeping (``_Base``: the
  in-flight count and the server's Retry-After pause, which ``--concurrency N`` honours
  too), so only the law that sets the limit differs.
- :class:`BatchLawForGateway`: the batch law (``AdaptiveConcurrency``) as a gateway
  ``Limiter``. The gateway reports each finished attempt with its latency and the
  requests in flight; sends are not reported, so the window's in-flight integral is
  stepped at completions (close to exact while the limit binds, the only time either
  law learns anything).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from infersight.batch.adaptive import AdaptiveConcurrency
from infersight.batch.controller import _Base
from infersight.gateway.limiter import GradientLimit, Limiter


class GradientForBatch(_Base):
    """The gateway's gradient law, fed by the batch runner."""

    def __init__(self, *, now: float, initial: int, minimum: int, maximum: int) -> None:
        super().__init__(limit=initial, t0=now)
        self.law = GradientLimit(initial, minimum, maximum)
        self.limit = self.law.limit
        self.history.append((now, self.limit))

    def _follow(self, now: float) -> None:
        if self.law.limit != self.limit:
            self._log(now, self.law.limit, "gradient")

    def on_success(
        self,
        now: float,
        *,
        started: float,
        latency: float,
        ttft: float | None = None,
        tpot: float | None = None,
    ) -> None:
        self.law.on_sample(latency, self.inflight, dropped=False)
        self.inflight = max(0, self.inflight - 1)
        self._follow(now)

    def on_error(
        self,
        now: float,
        *,
        started: float,
        kind: str,
        congestion: bool,
        retry_after: float | None = None,
    ) -> None:
        if congestion:
            self._pause(now, retry_after)
            self.law.on_sample(now - started, self.inflight, dropped=True)
        self.inflight = max(0, self.inflight - 1)
        self._follow(now)


class BatchLawForGateway(Limiter):
    """The batch law, fed by the gateway's admission control."""

    def __init__(
        self,
        initial: int,
        min_limit: int = 1,
        max_limit: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(initial, min_limit, max_limit)
        self._clock = clock
        self.law = AdaptiveConcurrency(
            now=clock(), initial=initial, minimum=self.min_limit, maximum=self.max_limit
        )

    @property
    def limit(self) -> int:
        return self.law.limit

    def on_sample(self, latency: float, inflight: int, dropped: bool) -> None:
        now = self._clock()
        self.law.inflight = inflight  # this attempt included, as on_success expects
        if dropped:
            self.law.on_error(now, started=now - latency, kind="Overloaded", congestion=True)
        else:
            self.law.on_success(now, started=now - latency, latency=latency)
