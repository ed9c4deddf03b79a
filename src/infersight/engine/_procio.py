"""Plumbing between the parent and the engine process: environment, pipes, stopping."""

from __future__ import annotations

import collections
import json
import os
import queue
import subprocess
from typing import IO, Any

from infersight.core.processes import stop_process
from infersight.engine.config import EngineConfig
from infersight.engine.threads import wait_env

__all__ = ["child_env", "llama_error_line", "pump_log", "read_events", "terminate"]


def child_env(config: EngineConfig) -> dict[str, str]:
    """The engine's environment: the caller's, with the configured OpenMP wait policy."""
    env = dict(os.environ)
    for name, value in wait_env(config.omp_wait_policy, config.omp_spin_count).items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def llama_error_line(lines: list[str]) -> str | None:
    """llama.cpp's first error line (usually the root cause), without its time stamp."""
    for raw in lines:
        stamp, sep, rest = raw.partition(" E ")  # "0.00.004.566 E gguf_init...: ..."
        if sep and stamp.replace(".", "").strip().isdigit() and rest.strip():
            return " ".join(rest.split())
    return None


def pump_log(stream: IO[bytes], tail: collections.deque[str], echo: IO[str] | None) -> None:
    # Drains the child's stderr so it never blocks on a full pipe.
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace").rstrip("\n")
        tail.append(line)
        if echo is not None:
            try:
                echo.write(line + "\n")
                echo.flush()
            except (OSError, ValueError):
                echo = None
    stream.close()


def read_events(stream: IO[bytes], events: queue.Queue[dict[str, Any] | None]) -> None:
    for raw in iter(stream.readline, b""):
        try:
            events.put(json.loads(raw))
        except ValueError:
            continue
    events.put(None)  # end of file: the child has exited
    stream.close()


def terminate(proc: subprocess.Popen[bytes], grace: float) -> None:
    if proc.poll() is not None:
        return
    try:
        if proc.stdin is not None:
            proc.stdin.close()  # end-of-file alone makes the child stop
    except OSError:
        pass
    stop_process(proc, grace)
