"""infersight.gateway.shared: state that gateway replicas share through Redis.

With ``[shared] redis_url`` set, per-key request and token limits and spend budgets
are enforced across all replicas (atomic Lua scripts on Redis's clock), spend totals
are kept per key, and a circuit breaker opened by one replica is honoured by every
replica within ``poll_ms``. Admission queues stay local. When Redis is unreachable a
replica keeps serving on its own limits (or refuses, ``on_redis_error = "reject"``),
says so in /health, logs and /metrics, and rejoins when Redis is back.

Needs the ``redis`` client: ``pip install 'infersight[redis]'``.
"""

from infersight.gateway.shared.breakers import SharedBreakers
from infersight.gateway.shared.config import SharedConfig
from infersight.gateway.shared.limits import Admission, SharedLimits
from infersight.gateway.shared.link import RedisLink, redis_client
from infersight.gateway.shared.metrics import SharedMetrics
from infersight.gateway.shared.state import SharedState

__all__ = [
    "Admission",
    "RedisLink",
    "SharedBreakers",
    "SharedConfig",
    "SharedLimits",
    "SharedMetrics",
    "SharedState",
    "redis_client",
]
