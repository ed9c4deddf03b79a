"""A server process and its descendants, one row each: what ``infersight monitor``
lists under the engine (like nvitop's process list, for a CPU or GPU server).

``serve`` is a front process with the llama.cpp engine as its child; vLLM has API
server and engine-core processes. Each row is read with psutil: CPU since the last
round (% of one core), resident memory, threads. A process seen for the first time has
no CPU figure yet (psutil measures between two calls).
"""

from __future__ import annotations

from dataclasses import dataclass

import psutil

__all__ = ["ProcessRow", "ProcessTree"]

_GONE = (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess)


@dataclass(frozen=True, slots=True)
class ProcessRow:
    pid: int
    #: 0 for the server process, 1 for its children, ...
    depth: int
    name: str
    #: % of one core since the previous round (None: first seen this round).
    cpu_percent: float | None
    rss_bytes: int | None
    threads: int | None
    #: The command line, shortened to its program and first arguments.
    command: str


def _command(p: psutil.Process) -> str:
    try:
        args = p.cmdline()
    except _GONE:
        return ""
    if not args:
        return ""
    head = args[0].rsplit("/", 1)[-1]
    return " ".join([head, *args[1:4]]) + (" ..." if len(args) > 4 else "")


class ProcessTree:
    """``rows()`` each round: the process ``pid`` and its descendants, in tree order."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self._seen: dict[int, psutil.Process] = {}

    def _tree(self) -> list[tuple[psutil.Process, int]]:
        try:
            root = psutil.Process(self.pid)
            kids = root.children(recursive=True)
        except _GONE:
            return []
        depth = {root.pid: 0}
        out = [(root, 0)]
        for k in kids:  # psutil lists parents before their children
            try:
                d = depth.get(k.ppid(), 0) + 1
            except _GONE:
                continue
            depth[k.pid] = d
            out.append((k, d))
        return out

    def rows(self) -> list[ProcessRow]:
        """One row per live process of the tree (gone ones are dropped)."""
        rows = []
        alive: dict[int, psutil.Process] = {}
        for p, depth in self._tree():
            known = self._seen.get(p.pid)
            proc = known if known is not None else p
            try:
                cpu = proc.cpu_percent(None)
                with proc.oneshot():
                    rss = int(proc.memory_info().rss)
                    threads = proc.num_threads()
                    name = proc.name()
            except _GONE:
                continue
            alive[p.pid] = proc
            rows.append(
                ProcessRow(
                    p.pid,
                    depth,
                    name,
                    cpu if known is not None else None,
                    rss,
                    threads,
                    _command(proc),
                )
            )
        self._seen = alive
        return rows
