"""The fake server every benchmark tool's importer test measures, and its load."""

from __future__ import annotations

from infersight_testkit.fake.openai import FakeConfig

__all__ = ["LEVELS", "REQUESTS", "SERVER"]

#: The concurrencies every tool measures the server at, and the requests at each.
LEVELS = [1, 4, 8]
REQUESTS = 24
#: 4 slots, 50 ms to the first token, 10 ms a token, 16 tokens, vLLM's /metrics names.
SERVER = FakeConfig(ttft=0.05, itl=0.01, tokens=16, slots=4, metrics_dialect="vllm")
