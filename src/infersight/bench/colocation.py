"""Does the server under test run on the load generator's cores?

When it does (bench started the embedded engine, or ``--url`` is a loopback address
served by a process of this machine), a late client is not starved by itself: the two
compete for the same CPUs. The client-limited flag then names that contention
(docs/design.md section 2) instead of blaming the client alone.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
from urllib.parse import urlsplit

import psutil

__all__ = ["cpu_contention", "is_loopback", "loopback_server_pid"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) is this machine's loopback."""
    try:
        return host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def loopback_server_pid(url: str) -> int | None:
    """The pid listening on a loopback URL's port, when this user may see it."""
    parts = urlsplit(url)
    if not is_loopback(parts.hostname or ""):
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    with contextlib.suppress(psutil.Error, OSError):
        for c in psutil.net_connections(kind="tcp"):
            if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port:
                return c.pid
    return None


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
        found = loopback_server_pid(base_url)
        if found is None:
            return None
        who, pid = f"the server under test (pid {found}, on this machine)", found
        if found == os.getpid():
            who = "the server under test (in the client's own process)"
    shared = _cores(os.getpid()) & _cores(pid)
    if not shared:
        return None
    return f"the client and {who} share {len(shared)} core{'s' if len(shared) != 1 else ''}"
