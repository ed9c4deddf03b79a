"""Stopping a child process: politely first, then for sure."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from typing import Any

__all__ = ["stop_group", "stop_process"]


def stop_process(proc: subprocess.Popen[Any], grace: float = 10.0, *, group: bool = False) -> None:
    """SIGTERM ``proc``, wait up to ``grace`` seconds, then SIGKILL it and reap it.

    With ``group=True`` (a child started with ``start_new_session=True``, e.g. a shell
    running a server) every process of its group gets the signals, so the server a
    shell started stops with it, even when the shell itself already exited.

    A process that already exited (or vanished) is only reaped; the call never raises
    for a process that is gone, so it is safe in ``finally`` blocks.
    """
    if group:
        _stop_group(proc, grace)
        return
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


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the group; False when no process of it is left."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _stop_group(proc: subprocess.Popen[Any], grace: float) -> None:
    # The leader is reaped as we go: an unreaped zombie would keep the group alive.
    stop_group(proc.pid, grace, reap=proc.poll)  # a session leader's group id is its pid
    with contextlib.suppress(subprocess.TimeoutExpired):  # only a hung kernel ignores SIGKILL
        proc.wait(timeout=5)


def stop_group(pgid: int, grace: float = 10.0, *, reap: Callable[[], object] | None = None) -> None:
    """SIGTERM every process of the group ``pgid``, wait up to ``grace`` seconds for
    the group to empty, then SIGKILL what is left. For a server another process
    started in a session of its own (its pid is the group's id); ``reap`` is called
    while waiting where the caller is the leader's parent (``Popen.poll``: None while it runs)."""
    if _signal_group(pgid, signal.SIGTERM):
        deadline = time.monotonic() + grace
        while (reap is not None and reap() is None) or _signal_group(pgid, 0):
            if time.monotonic() >= deadline:
                _signal_group(pgid, signal.SIGKILL)
                break
            time.sleep(0.05)
