"""Stopping a child process: politely first, then for sure."""

from __future__ import annotations

import subprocess
from typing import Any

__all__ = ["stop_process"]


def stop_process(proc: subprocess.Popen[Any], grace: float = 10.0) -> None:
    """SIGTERM ``proc``, wait up to ``grace`` seconds, then SIGKILL it and reap it.

    A process that already exited (or vanished) is only reaped; the call never raises
    for a process that is gone, so it is safe in ``finally`` blocks.
    """
    if proc.poll() is not None:
        return
    try:
        proc.terminate()
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=5)
    except ProcessLookupError:
        pass
