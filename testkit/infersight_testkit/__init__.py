"""infersight_testkit: a fake OpenAI-compatible server for tests, benchmarks and
demos, with scripted faults, N slots and each engine's dialect of /metrics (each
engine's real out-of-memory answer, broken framing and stalling bodies in
``fake.faults``), in-process (``FakeOpenAI``) or in its own process (``FakeProcess``)."""

from infersight_testkit.fake import Behavior, FakeConfig, FakeOpenAI, FakeProcess, parse_behavior

__all__ = ["Behavior", "FakeConfig", "FakeOpenAI", "FakeProcess", "parse_behavior"]
