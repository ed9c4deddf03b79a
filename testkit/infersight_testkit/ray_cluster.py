"""A real two-node Ray cluster on this machine, for the ``bench --ray`` tests and the
``benchmarks/ray_loadgen.py`` figures.

``ray start --head`` and a second node joined with ``ray start --address``, each with
1 CPU, their own temporary directory and no dashboard. Everything stays on loopback:
Ray turns "127.0.0.1" into the host's outward address, so the nodes take 127.0.0.2
and 127.0.0.3 (loopback too, and distinct node addresses, as on two hosts). Both run
with ``--block``, so stopping them stops exactly the processes this test started
(``ray stop`` would stop every Ray process of the machine).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import psutil

from infersight.core.errors import ConfigError

__all__ = ["LocalRayCluster"]

HEAD_IP, NODE_IP = "127.0.0.2", "127.0.0.3"
_STARTED = "Ray runtime started"


class LocalRayCluster:
    """Head and one worker node; ``address`` is what ``--ray`` takes. ``ray_cli`` is
    the ``ray`` program (the one of the Python that runs the workers)."""

    def __init__(self, ray_cli: str, port: int, *, timeout: float = 120.0) -> None:
        self.ray_cli = ray_cli
        self.address = f"{HEAD_IP}:{port}"
        # Short: Ray's unix socket paths must stay under ~107 characters.
        self.temp_dir = Path(tempfile.mkdtemp(prefix="isray-"))
        self.env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
        self._procs: list[subprocess.Popen[bytes]] = []
        self._logs: list[Path] = []
        try:
            self._start(
                "head",
                "--head",
                "--port",
                str(port),
                "--node-ip-address",
                HEAD_IP,
                "--temp-dir",
                str(self.temp_dir),
                "--include-dashboard=false",
                timeout=timeout,
            )
            self._start(
                "node", "--address", self.address, "--node-ip-address", NODE_IP, timeout=timeout
            )
        except BaseException:
            self.stop()
            raise

    def _start(self, name: str, *args: str, timeout: float) -> None:
        log = self.temp_dir / f"{name}.log"
        cmd = [
            self.ray_cli,
            "start",
            "--block",
            "--num-cpus",
            "1",
            "--disable-usage-stats",
            # A small object store: the workers pass records, not large objects.
            "--object-store-memory",
            str(100 * 2**20),
            *args,
        ]
        with log.open("wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=self.env)
        self._procs.append(proc)
        self._logs.append(log)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if _STARTED in log.read_text(errors="replace"):
                return
            if proc.poll() is not None:
                break
            time.sleep(0.2)
        raise ConfigError(f"ray start ({name}) did not start: {log.read_text()[-3000:]}")

    def __enter__(self) -> LocalRayCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        """SIGTERM the two ``ray start --block`` processes (they stop their own
        children), then SIGKILL whatever of theirs is left after 30 s."""
        tree: list[psutil.Process] = []
        for p in self._procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                tree += psutil.Process(p.pid).children(recursive=True)
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self._procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        _gone, alive = psutil.wait_procs(tree, timeout=10)
        for q in alive:
            q.kill()
        self._procs = []
        shutil.rmtree(self.temp_dir, ignore_errors=True)
