"""The servers ``engine_scaling.py`` measures side by side (not run by itself).

- infersight's embedded engine (one per ``--variant``);
- raw llama.cpp: the same library (xllamacpp's ``Server``) with llama-server's defaults:
  nothing set but the model, the slots and the context, no OpenMP variables;
- `infersight serve` (the gateway in front of the engine), of this checkout or of another
  revision's ``src`` (``served``);
- a spinner: another process that keeps one core busy (``--busy``).

Every server stays up for the whole run; the ones not being measured are frozen with
SIGSTOP, so an idle server that spins cannot take the CPU from the one being measured.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from infersight.core.processes import stop_process
from infersight.engine import EmbeddedEngine

#: Environment variables that change how llama.cpp's OpenMP threads wait; the raw
#: side runs without any of them (llama-server as a user starts it).
OMP_VARS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME", "OMP_NUM_THREADS")
RAW = "raw llama.cpp"


@dataclass
class Side:
    """One server measured in the run: ours (a variant) or raw llama.cpp."""

    name: str
    url: str
    pid: int | None
    settings: dict[str, Any]
    quiet: dict[int, list[Any]] = field(default_factory=dict)  # level -> Levels
    busy: dict[int, list[Any]] = field(default_factory=dict)

    def freeze(self, frozen: bool) -> None:
        """Stop (or go on with) the server and its children (serve's engine)."""
        if self.pid is None:
            return
        pids = [self.pid]
        with contextlib.suppress(psutil.Error):
            pids += [c.pid for c in psutil.Process(self.pid).children(recursive=True)]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGSTOP if frozen else signal.SIGCONT)


@contextlib.contextmanager
def ours(variant: dict[str, Any], name: str) -> Iterator[Side]:
    with EmbeddedEngine(**variant) as eng:
        yield Side(name=name, url=eng.base_url, pid=eng.pid, settings=dict(eng.settings))


@contextlib.contextmanager
def served(
    parallel: int, ctx: int | None, src: Path | None, name: str = "infersight serve"
) -> Iterator[Side]:
    """`infersight serve` on a free port (``src``: another revision's code first on the
    path), stopped with SIGINT after the run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERSIGHT_")}
    if src is not None:
        env["PYTHONPATH"] = str(src)
    cmd = [
        sys.executable,
        "-c",
        "from infersight.cli import main; main()",
        "serve",
        "--port",
        "0",
        "--parallel",
        str(parallel),
        *(["--ctx", str(ctx)] if ctx else []),
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    try:
        assert proc.stdout is not None
        banner: list[str] = []
        while not banner or not banner[-1].startswith("Press Ctrl-C"):
            line = proc.stdout.readline()
            if not line:
                raise SystemExit(f"error: {name} did not start")
            banner.append(line.rstrip())
        url = banner[0].split("listening on ")[1].split()[0]
        threads = next(
            (ln.split(None, 1)[1] for ln in banner if ln.strip().startswith("threads")), "-"
        )
        yield Side(
            name=name, url=url, pid=proc.pid, settings={"parallel": parallel, "threads": threads}
        )
    finally:
        with contextlib.suppress(ProcessLookupError, psutil.Error):
            for pid in [proc.pid, *(c.pid for c in psutil.Process(proc.pid).children(True))]:
                os.kill(pid, signal.SIGCONT)
        stop_process(proc, grace=30)  # SIGTERM: serve stops cleanly


def raw_server(model: str, parallel: int, ctx: int) -> None:
    """Child: xllamacpp's Server with llama-server defaults; prints its URL, runs until
    stdin closes."""
    import xllamacpp

    p = xllamacpp.CommonParams()
    p.model.path = model
    p.n_parallel = parallel  # the same slots and context as the infersight side;
    p.n_ctx = ctx  # everything else is the library's default
    p.hostnames = ["127.0.0.1"]
    p.port = 0
    server = xllamacpp.Server(p)
    print(str(server.listening_address).rstrip("/").rsplit(":", 1)[1], flush=True)
    sys.stdin.read()
    os._exit(0)


@contextlib.contextmanager
def raw(parallel: int, ctx: int, model: str) -> Iterator[Side]:
    env = {k: v for k, v in os.environ.items() if k not in OMP_VARS}
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--raw-server", model, str(parallel), str(ctx)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env=env,
            text=True,
        )
        try:
            assert proc.stdout is not None
            port = proc.stdout.readline().strip()
            if not port.isdigit():
                raise SystemExit("error: the raw llama.cpp server did not start")
            log.seek(0)
            # llama.cpp logs its thread choice ("system_info: n_threads = 2 (...) / 2").
            found = (ln.split("n_threads = ", 1)[1] for ln in log if "n_threads = " in ln)
            threads = next(found, "llama.cpp default").split(" |")[0].strip()
            settings = {
                "parallel": parallel,
                "ctx_per_slot": ctx // parallel,
                "threads": threads,
                "omp_wait": "unset (libgomp default)",
            }
            yield Side(name=RAW, url=f"http://127.0.0.1:{port}", pid=proc.pid, settings=settings)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
            assert proc.stdin is not None
            proc.stdin.close()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextlib.contextmanager
def spinner() -> Iterator[int]:
    """Another process spinning one core (not pinned: the scheduler places it)."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__" and sys.argv[1:2] == ["--raw-server"]:
    raw_server(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
