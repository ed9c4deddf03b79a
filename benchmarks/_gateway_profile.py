"""Where one gateway process spends its CPU per request (`gateway_overhead.py --profile`).

By default cProfile runs inside the gateway, timed by the thread's CPU clock (a wall
clock would charge a send to whatever preempted the gateway after it): each
function's own time is charged to a known part (the access log, metrics, validation,
routing, the HTTP guard, the infersight client, aiohttp's server or client, the
kernel's socket sends...), and each part's share times the CPU per request measured
without the profiler gives microseconds per request. cProfile inflates Python-heavy
parts, so read their shares as an upper bound. ``--pyspy`` samples from outside
instead (``--nonblocking``, installed on first use into ``.bench-venvs/py-spy``);
on a busy machine its idle detection is unreliable.
"""

from __future__ import annotations

import collections
import os
import pstats
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _gateway_targets import BENCH_VENVS

#: (part, path fragment, function name or None): the first rule that matches wins.
RULES: list[tuple[str, str, str | None]] = [
    ("kernel: socket sends", "aiohttp/http_writer.py", "_write"),
    ("kernel: socket sends", "aiohttp/http_writer.py", "_writelines"),
    ("access log (logging)", "/logging/", None),
    ("metrics (prometheus_client)", "prometheus_client/", None),
    ("gateway: parse + validate", "infersight/gateway/request_body.py", None),
    ("gateway: listener + request guard", "infersight/gateway/listener.py", None),
    ("gateway: listener + request guard", "infersight/gateway/request_guard.py", None),
    ("gateway: routing", "infersight/gateway/router.py", None),
    ("gateway: admission + breaker", "infersight/gateway/admission.py", None),
    ("gateway: admission + breaker", "infersight/gateway/limiter.py", None),
    ("gateway: admission + breaker", "infersight/gateway/breaker.py", None),
    ("gateway: keys", "infersight/gateway/auth.py", None),
    ("metrics (prometheus_client)", "infersight/gateway/metrics.py", None),
    ("access log (logging)", "infersight/gateway/access_log_writer.py", None),
    ("gateway: accounting", "infersight/gateway/accounting.py", None),
    ("gateway: handler + proxy", "infersight/gateway/", None),
    ("infersight client", "infersight/client/", None),
    ("infersight core", "infersight/core/", None),
    ("aiohttp client", "aiohttp/client", None),
    ("aiohttp client", "aiohttp/connector.py", None),
    ("aiohttp server", "aiohttp/web", None),
    ("aiohttp (both sides)", "aiohttp/", None),
    ("request ids (uuid)", "/uuid.py", None),
    ("event loop + tasks", "/asyncio/", None),
    ("event loop + tasks", "uvloop", None),
]

_FRAME = re.compile(r"^(?P<func>.*) \((?P<path>.*?):(?P<line>\d+)\)$")


def part_of(path: str, func: str) -> str | None:
    path = path if path.startswith("/") else "/" + path  # py-spy prints paths from sys.path
    func = func.rsplit(".", 1)[-1]
    for part, frag, name in RULES:
        if frag in path and (name is None or func == name):
            return part
    return None


def _from_pyspy(raw: Path) -> tuple[collections.Counter[str], collections.Counter[str]]:
    parts: collections.Counter[str] = collections.Counter()
    funcs: collections.Counter[str] = collections.Counter()
    for line in raw.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        if not stack or not n.isdigit():
            continue
        frames = [m.groupdict() for f in stack.split(";") if (m := _FRAME.match(f))]
        if not frames:
            continue
        leaf = frames[-1]
        funcs[f"{leaf['func']} ({_short(leaf['path'])})"] += int(n)
        part = next((p for f in reversed(frames) if (p := part_of(f["path"], f["func"]))), "other")
        parts[part] += int(n)
    return parts, funcs


def _from_cprofile(out: Path) -> tuple[collections.Counter[str], collections.Counter[str]]:
    parts: collections.Counter[str] = collections.Counter()
    funcs: collections.Counter[str] = collections.Counter()
    gc_file = out.with_name(out.name + ".gc")
    if gc_file.exists():
        parts["cyclic GC"] = funcs["(cyclic garbage collector)"] = int(
            float(gc_file.read_text()) * 1e6
        )
        gc_file.unlink()
    stats = pstats.Stats(str(out)).stats  # type: ignore[attr-defined]
    for (path, _line, func), (_cc, _nc, tt, _ct, _callers) in stats.items():
        us = int(tt * 1e6)
        if path == "~":
            part = "kernel: socket sends" if "write" in func or "send" in func else "C calls"
        else:
            part = part_of(path, func) or "other"
        parts[part] += us
        funcs[f"{func} ({_short(path)})"] += us
    return parts, funcs


def _short(path: str) -> str:
    for cut in ("site-packages/", "/src/", "/lib/python3"):
        if cut in path:
            return path.split(cut, 1)[1]
    return path


def pyspy_binary() -> str | None:
    """py-spy on PATH, else in the benchmark venv (installed there on first use)."""
    found = shutil.which("py-spy")
    if found:
        return found
    exe = BENCH_VENVS / "py-spy" / "bin" / "py-spy"
    if exe.exists():
        return str(exe)
    print(f"installing py-spy into {exe.parent.parent} (one time)...", flush=True)
    try:
        subprocess.run([sys.executable, "-m", "venv", str(exe.parent.parent)], check=True)
        subprocess.run(
            [str(exe.parent / "pip"), "install", "-q", "py-spy"], check=True, timeout=300
        )
    except (subprocess.SubprocessError, OSError) as e:
        print(f"note: py-spy install failed ({e}); profiling with cProfile instead")
        return None
    return str(exe) if exe.exists() else None


#: Code run in the gateway process for a cProfile profile: SIGUSR1 starts it, SIGUSR2
#: stops it and writes the stats (the gateway keeps serving either way).
CPROFILE_PREFIX = [
    "import cProfile, os, signal, time",
    "_p = []",
    # CPU time, not wall time: on a shared machine a send that wakes another process
    # is often followed by a preemption, which a wall clock would charge to the send.
    # cProfile does not see the cyclic garbage collector: its CPU time is summed apart.
    "import gc",
    "_gc = [0.0, 0.0, False]",
    "def _gcb(phase, info):",
    "    if not _gc[2]: return",
    "    if phase == 'start': _gc[1] = time.thread_time()",
    "    else: _gc[0] += time.thread_time() - _gc[1]",
    "gc.callbacks.append(_gcb)",
    "def _on(*a): _gc[:] = [0.0, 0.0, True]; _p[:] = [cProfile.Profile(time.thread_time)]; "
    "_p[0].enable()",
    "def _off(*a): _p[0].disable(); _gc[2] = False; "
    "open(os.environ['BENCH_CPROFILE_OUT'] + '.gc', 'w').write(repr(_gc[0])); "
    "_p[0].dump_stats(os.environ['BENCH_CPROFILE_OUT'])",
    "signal.signal(signal.SIGUSR1, _on)",
    "signal.signal(signal.SIGUSR2, _off)",
    "from infersight.cli import main",
    "main()",
]


class Profiler:
    """Samples one gateway process between :meth:`start` and :meth:`stop`."""

    def __init__(
        self, pid: int, pyspy: str | None, cprofile_out: Path | None, cpus: list[int] | None
    ) -> None:
        """``pyspy``: its binary, or None for cProfile (the gateway must then have been
        started with :data:`CPROFILE_PREFIX`)."""
        self.pid = pid
        self.cpus = cpus
        self.exe = pyspy
        self.cprofile_out = cprofile_out
        self.raw = Path("gateway.raw")  # a fresh folder per start(): stop() removes it
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def kind(self) -> str:
        return "py-spy" if self.exe else "cProfile"

    def start(self) -> None:
        if self.exe is None:
            os.kill(self.pid, signal.SIGUSR1)
            return
        self.raw = Path(tempfile.mkdtemp(prefix="bench-prof-")) / "gateway.raw"
        self._proc = subprocess.Popen(
            [
                self.exe,
                "record",
                "--pid",
                str(self.pid),
                "--rate",
                "400",
                "--nonblocking",
                "--format",
                "raw",
                "--output",
                str(self.raw),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=(lambda: os.sched_setaffinity(0, self.cpus)) if self.cpus else None,
        )
        time.sleep(0.5)  # py-spy attaches

    def stop(self) -> tuple[collections.Counter[str], collections.Counter[str]] | None:
        if self.exe is None:
            assert self.cprofile_out is not None
            os.kill(self.pid, signal.SIGUSR2)
            for _ in range(100):
                if self.cprofile_out.exists() and self.cprofile_out.stat().st_size:
                    time.sleep(0.2)
                    try:
                        return _from_cprofile(self.cprofile_out)
                    finally:
                        self.cprofile_out.unlink()  # the next profile starts from zero
                time.sleep(0.1)
            return None
        assert self._proc is not None
        self._proc.send_signal(signal.SIGINT)
        try:
            self._proc.wait(30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
        try:
            return _from_pyspy(self.raw) if self.raw.exists() else None
        finally:
            shutil.rmtree(self.raw.parent, ignore_errors=True)


def print_breakdown(
    title: str,
    result: tuple[collections.Counter[str], collections.Counter[str]],
    cpu_us_per_req: float,
    top: int = 12,
) -> None:
    parts, funcs = result
    total = sum(parts.values()) or 1
    print(f"\n{title}: {cpu_us_per_req:.0f} us of gateway CPU per request")
    print(f"  {'part':<32}{'share':>7}{'us/req':>9}")
    for part, n in parts.most_common():
        print(f"  {part:<32}{100 * n / total:>6.1f}%{cpu_us_per_req * n / total:>9.1f}")
    print("  top functions (self time):")
    ftotal = sum(funcs.values()) or 1
    for f, n in funcs.most_common(top):
        print(f"    {100 * n / ftotal:5.1f}%  {f}")
