"""infersight.testing.fake: the fake OpenAI-compatible server.

- ``config``: its configuration and scripted faults (``FakeConfig``, ``Behavior``);
- ``faults``: each engine's real out-of-memory answer, broken framing, stalling bodies;
- ``slots``: the engine model, N generation slots with a FIFO wait queue;
- ``dialects``, ``metrics``: ``/metrics`` in each real engine's own names;
- ``responses``, ``stream``, ``extras``: JSON answers, the streamed answer, the secondary
  and control endpoints;
- ``state``: what the server holds; ``openai``: the server (``FakeOpenAI``);
- ``process``: the server in its own process (``FakeProcess``) and the
  ``python -m infersight.testing.fake.openai`` entry.
"""

from infersight.testing.fake.config import Behavior, FakeConfig, parse_behavior
from infersight.testing.fake.openai import FakeOpenAI
from infersight.testing.fake.process import FakeProcess

__all__ = ["Behavior", "FakeConfig", "FakeOpenAI", "FakeProcess", "parse_behavior"]
