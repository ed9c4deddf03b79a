"""infersight.testing: helpers for tests and benchmarks: a fake OpenAI server (with
scripted faults, N slots and engine-dialect /metrics; each engine's real out-of-memory
answer, broken framing and stalling bodies in ``fake_faults``), a real ``redis-server``
on a free port (``RedisServer``), in ``queue_sim`` a simulated FIFO slot server that
yields request records with their true queue waits, in ``raw_http`` a raw-socket client
for slow and malformed requests, and in ``http_fuzz`` Hypothesis strategies over request
bodies and framing (needs the dev extra)."""

from infersight.testing.fake_config import Behavior, FakeConfig, parse_behavior
from infersight.testing.fake_openai import FakeOpenAI
from infersight.testing.fake_process import FakeProcess
from infersight.testing.redis_server import RedisServer

__all__ = ["Behavior", "FakeConfig", "FakeOpenAI", "FakeProcess", "RedisServer", "parse_behavior"]
