"""Host sampler: CPU per core and in total, memory, network bytes, and the CPU and
memory of named processes (the engine, the load generator), through ``psutil``.

CPU percentages are measured between two consecutive rounds, so the first round after
construction covers the time since the sampler was created (it primes the counters).
Process CPU uses psutil's convention: 100 means one whole core.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import psutil

from infersight.core.records import Sample

__all__ = ["HostSampler"]

#: Shortest interval (s) over which a CPU percentage is reported.
_MIN_CPU_INTERVAL = 0.05


class _Watched:
    """A named process and the psutil handle used to read it."""

    __slots__ = ("_child_cache", "children", "name", "pid", "proc")

    def __init__(self, name: str, pid: int, children: bool) -> None:
        self.name = name
        self.pid = pid
        self.children = children
        self.proc: psutil.Process | None
        try:
            self.proc = psutil.Process(pid)
            self.proc.cpu_percent(None)  # prime: the next call measures from here
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            self.proc = None
        self._child_cache: dict[int, psutil.Process] = {}

    def read(self, exclude: frozenset[int] = frozenset()) -> tuple[float | None, float | None]:
        """(cpu_percent, rss_bytes); None for a process that has gone. With children,
        descendants in ``exclude`` (watched under their own name) and their subtrees
        are left out, so an engine started by the load generator is not counted twice."""
        if self.proc is None:
            return None, None
        try:
            with self.proc.oneshot():
                cpu = self.proc.cpu_percent(None)
                rss = float(self.proc.memory_info().rss)
            if self.children:
                cpu_c, rss_c = self._read_children(exclude)
                cpu += cpu_c
                rss += rss_c
            return cpu, rss
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            self.proc = None
            return None, None

    def _descendants(self, exclude: frozenset[int]) -> list[psutil.Process]:
        assert self.proc is not None
        out: list[psutil.Process] = []
        stack = [self.proc]
        while stack:
            try:
                kids = stack.pop().children()
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            for k in kids:
                if k.pid not in exclude:
                    out.append(k)
                    stack.append(k)
        return out

    def _read_children(self, exclude: frozenset[int]) -> tuple[float, float]:
        cpu = rss = 0.0
        seen: dict[int, psutil.Process] = {}
        for child in self._descendants(exclude):
            # Reuse the handle so cpu_percent measures from the previous round.
            handle = self._child_cache.get(child.pid, child)
            try:
                c = handle.cpu_percent(None)
                r = handle.memory_info().rss
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
            if child.pid in self._child_cache:
                cpu += c  # a fresh handle's first reading is meaningless (0.0)
            rss += r
            seen[child.pid] = handle
        self._child_cache = seen
        return cpu, rss


class HostSampler:
    """CPU, memory and network of this host, and named processes.

    ``processes`` maps a label name to a pid (``{"engine": eng.pid, "loadgen":
    os.getpid()}``). ``children=True`` adds each process's descendants into its figures
    (useful when an engine forks workers).
    """

    name = "host"

    def __init__(
        self,
        processes: Mapping[str, int] | None = None,
        *,
        per_cpu: bool = True,
        children: bool = False,
    ) -> None:
        self.per_cpu = per_cpu
        self._watched = [_Watched(n, int(p), children) for n, p in (processes or {}).items()]
        # Prime the system-wide CPU counters.
        psutil.cpu_percent(None, percpu=True)
        self._last = time.monotonic()

    def sample_sync(self) -> list[Sample]:
        """One round of readings (synchronous; psutil calls take microseconds)."""
        t = time.monotonic()
        # CPU percentages over less than this are noise (psutil reports 0.0): N/A.
        measurable = t - self._last >= _MIN_CPU_INTERVAL
        self._last = t
        out: list[Sample] = []
        per_core: list[float | None] = list(psutil.cpu_percent(None, percpu=True))
        if not measurable:
            per_core = [None] * len(per_core)
        # The total is computed from the same interval as the per-core figures.
        known = [v for v in per_core if v is not None]
        total = sum(known) / len(known) if known else None
        out.append(Sample(t, "host.cpu_percent", total, {"cpu": "all"}))
        if self.per_cpu:
            out.extend(
                Sample(t, "host.cpu_percent", v, {"cpu": str(i)}) for i, v in enumerate(per_core)
            )
        vm = psutil.virtual_memory()
        out.append(Sample(t, "host.memory_used_bytes", float(vm.total - vm.available), {}))
        out.append(Sample(t, "host.memory_total_bytes", float(vm.total), {}))
        try:
            net = psutil.net_io_counters()
        except (OSError, RuntimeError):
            net = None
        out.append(Sample(t, "host.net_rx_bytes_total", float(net.bytes_recv) if net else None, {}))
        out.append(Sample(t, "host.net_tx_bytes_total", float(net.bytes_sent) if net else None, {}))
        watched = frozenset(w.pid for w in self._watched)
        for w in self._watched:
            cpu, rss = w.read(watched - {w.pid})
            if not measurable:
                cpu = None
            labels = {"name": w.name, "pid": str(w.pid)}
            out.append(Sample(t, "process.cpu_percent", cpu, labels))
            out.append(Sample(t, "process.rss_bytes", rss, dict(labels)))
        return out

    async def sample(self) -> list[Sample]:
        return self.sample_sync()

    async def close(self) -> None:
        self._watched.clear()
