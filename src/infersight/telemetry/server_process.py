"""Which local process serves a URL, and which of its processes does the computing.

A server's listening process is not always the one that computes: ``infersight serve``
answers on a front (an HTTP server in Python) and runs llama.cpp in a child process
that listens on a private loopback port of its own; vLLM's API server hands the work to
an engine-core process it started. ``monitor``, bench's telemetry and so ``diagnose``
must watch the one that computes (docs/design.md section 5, notes on CPU engines), so
it is found from the process tree, whatever the front is made of:

1. a descendant of the listening process that listens on a TCP port itself (an engine
   behind a front); with several, the one that has used the most CPU;
2. else the descendant that has used the most CPU, if it used more than the listening
   process (a worker the front forked);
3. else the listening process itself.
"""

from __future__ import annotations

import contextlib
from urllib.parse import urlsplit

import psutil

from infersight.core.endpoint import is_loopback

__all__ = ["computing_pid", "listening_pid", "server_pid"]


def _listeners() -> dict[int, set[int]]:
    """pid -> the TCP ports it listens on (those this user may see)."""
    out: dict[int, set[int]] = {}
    with contextlib.suppress(psutil.Error, OSError):
        for c in psutil.net_connections(kind="tcp"):
            if c.status == psutil.CONN_LISTEN and c.laddr and c.pid:
                out.setdefault(int(c.pid), set()).add(int(c.laddr.port))
    return out


def listening_pid(url: str) -> int | None:
    """The pid listening on a loopback URL's port, when this user may see it."""
    parts = urlsplit(url)
    if not is_loopback(parts.hostname or ""):
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return next((pid for pid, ports in _listeners().items() if port in ports), None)


def _cpu_seconds(p: psutil.Process) -> float:
    try:
        t = p.cpu_times()
        return float(t.user + t.system)
    except (psutil.Error, OSError):
        return 0.0


def computing_pid(pid: int) -> int:
    """The process that computes for the server listening as ``pid`` (see the module)."""
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except (psutil.Error, OSError):
        return pid
    if not kids:
        return pid
    listening = _listeners()
    behind = [k for k in kids if k.pid in listening]
    if behind:
        return max(behind, key=_cpu_seconds).pid
    busiest = max(kids, key=_cpu_seconds)
    with contextlib.suppress(psutil.Error, OSError):
        if _cpu_seconds(busiest) > _cpu_seconds(psutil.Process(pid)):
            return busiest.pid
    return pid


def server_pid(url: str) -> int | None:
    """The process that computes for the server at a loopback ``url`` (None: not local)."""
    pid = listening_pid(url)
    return None if pid is None else computing_pid(pid)
