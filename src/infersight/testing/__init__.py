"""infersight.testing: helpers for tests and benchmarks: a fake OpenAI server (with
scripted faults, N slots and engine-dialect /metrics), a real ``redis-server`` on a
free port (``RedisServer``) and, in ``queue_sim``, a simulated FIFO slot server that
yields request records with their true queue waits."""

from infersight.testing.fake_config import Behavior, FakeConfig, parse_behavior
from infersight.testing.fake_openai import FakeOpenAI
from infersight.testing.fake_process import FakeProcess
from infersight.testing.redis_server import RedisServer

__all__ = ["Behavior", "FakeConfig", "FakeOpenAI", "FakeProcess", "RedisServer", "parse_behavior"]
