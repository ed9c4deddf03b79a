"""Does the server under test run on the load generator's cores?

When it does (bench started the embedded engine, or ``--url`` is a loopback address
served by a process of this machine), a late client is not starved by itself: the two
compete for the same CPUs. The client-limited flag then names that contention
(docs/design.md section 2) instead of blaming the client alone.
"""

from __future__ import annotations

import os

import psutil

from infersight.telemetry.server_process import computing_pid, listening_pid

__all__ = ["cpu_contention"]


def _cores(pid: int) -> set[int]:
    try:
        return set(psutil.Process(pid).cpu_affinity() or [])
    except (psutil.Error, AttributeError, OSError):  # no affinity API (macOS)
        return set(range(os.cpu_count() or 1))


def cpu_contention(base_url: str, engine_pid: int | None) -> str | None:
    """A phrase naming the shared cores, e.g. "the client and the embedded engine share
    2 cores", or None when the server runs elsewhere (or cannot be found)."""
    if engine_pid is not None:
        who, pid = "the embedded engine", engine_pid
    else:
        found = listening_pid(base_url)
        if found is None:
            return None
        if found == os.getpid():
            who, pid = "the server under test (in the client's own process)", found
        else:  # the process that computes: for `infersight serve`, its llama.cpp child
            pid = computing_pid(found)
            who = f"the server under test (pid {pid}, on this machine)"
    shared = _cores(os.getpid()) & _cores(pid)
    if not shared:
        return None
    return f"the client and {who} share {len(shared)} core{'s' if len(shared) != 1 else ''}"
