"""infersight.testing: helpers for tests and benchmarks (a fake OpenAI server)."""

from infersight.testing.fake_config import Behavior, FakeConfig, parse_behavior
from infersight.testing.fake_openai import FakeOpenAI
from infersight.testing.fake_process import FakeProcess

__all__ = ["Behavior", "FakeConfig", "FakeOpenAI", "FakeProcess", "parse_behavior"]
