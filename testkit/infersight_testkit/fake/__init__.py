"""infersight_testkit.fake: the fake OpenAI-compatible server.

- ``config``: its configuration and scripted faults (``FakeConfig``, ``Behavior``);
- ``faults``: each engine's real out-of-memory answer, broken framing, stalling bodies;
- ``slots``: the engine model, N generation slots with a FIFO wait queue;
- ``dialects``, ``metrics``: ``/metrics`` in each real engine's own names;
- ``responses``, ``stream``, ``extras``: JSON answers, the streamed answer, the secondary
  and control endpoints;
- ``state``: what the server holds; ``openai``: the server (``FakeOpenAI``);
- ``process``: the server in its own process (``FakeProcess``) and the
  ``python -m infersight_testkit.fake.openai`` entry.
"""

from infersight_testkit.fake.config import Behavior, FakeConfig, parse_behavior
from infersight_testkit.fake.openai import FakeOpenAI
from infersight_testkit.fake.process import FakeProcess

__all__ = ["Behavior", "FakeConfig", "FakeOpenAI", "FakeProcess", "parse_behavior"]
