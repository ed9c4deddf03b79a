"""infersight.testing: helpers for tests and benchmarks: a fake OpenAI server (with
scripted faults, N slots and engine-dialect /metrics) and, in ``queue_sim``, a simulated
FIFO slot server that yields request records with their true queue waits; and, in
``raw_http``, exact bytes on the wire for tests of malformed or slow requests."""

from infersight.testing.fake_config import Behavior, FakeConfig, parse_behavior
from infersight.testing.fake_openai import FakeOpenAI
from infersight.testing.fake_process import FakeProcess
from infersight.testing.raw_http import RawAnswer, exchange_raw, request_bytes, send_raw

__all__ = [
    "Behavior",
    "FakeConfig",
    "FakeOpenAI",
    "FakeProcess",
    "RawAnswer",
    "exchange_raw",
    "parse_behavior",
    "request_bytes",
    "send_raw",
]
