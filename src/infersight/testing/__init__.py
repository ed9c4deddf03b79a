"""infersight.testing: a fake OpenAI-compatible server for tests, benchmarks and
demos, with scripted faults, N slots and each engine's dialect of /metrics (each
engine's real out-of-memory answer, broken framing and stalling bodies in
``fake_faults``), in-process (``FakeOpenAI``) or in its own process (``FakeProcess``)."""

from infersight.testing.fake_config import Behavior, FakeConfig, parse_behavior
from infersight.testing.fake_openai import FakeOpenAI
from infersight.testing.fake_process import FakeProcess

__all__ = ["Behavior", "FakeConfig", "FakeOpenAI", "FakeProcess", "parse_behavior"]
