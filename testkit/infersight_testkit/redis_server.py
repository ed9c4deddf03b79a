"""A real ``redis-server`` for tests and benchmarks: 127.0.0.1, its own port and temp
dir, no persistence. It can be stopped and started again on the same port, to see what
gateway replicas do while their shared state is away.

    with RedisServer() as redis:
        redis.url            # redis://127.0.0.1:PORT/0
        redis.stop(); redis.start()
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from infersight.core.errors import ConfigError
from infersight.core.listen import free_port
from infersight.core.processes import stop_process

__all__ = ["RedisServer"]


def redis_server_path() -> str | None:
    """Where ``redis-server`` is installed (PATH, then /usr/bin and /usr/sbin), or None."""
    found = shutil.which("redis-server")
    if found:
        return found
    for d in ("/usr/bin", "/usr/sbin"):
        p = Path(d) / "redis-server"
        if p.is_file():
            return str(p)
    return None


def _ping(port: int, timeout: float = 0.5) -> bool:
    """A raw ``PING`` (no client library needed)."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(b"PING\r\n")
            return s.recv(16).startswith(b"+PONG")
    except OSError:
        return False


class RedisServer:
    """One ``redis-server`` process this object started, and only that one."""

    def __init__(self, port: int | None = None, *, startup_timeout: float = 20.0) -> None:
        exe = redis_server_path()
        if exe is None:
            raise ConfigError(
                "redis-server is not installed (Debian: apt-get install redis-server)"
            )
        self.exe = exe
        self.port = port or free_port()
        self.startup_timeout = startup_timeout
        self._dir = Path(tempfile.mkdtemp(prefix="infersight-redis-"))
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start it (on the same port as before) and wait until it answers PING."""
        if self.running:
            return
        log = (self._dir / "redis.log").open("ab")
        args = [
            self.exe,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--dir",
            str(self._dir),
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--protected-mode",
            "yes",
            "--loglevel",
            "warning",
            "--databases",
            "1",
        ]
        try:
            self._proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        finally:
            log.close()
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                break
            if _ping(self.port):
                return
            time.sleep(0.02)
        tail = (self._dir / "redis.log").read_text(errors="replace")[-400:]
        self.stop()
        raise ConfigError(f"redis-server did not start on port {self.port}: {tail.strip()}")

    def stop(self) -> None:
        """Stop the process this object started (SIGTERM, then SIGKILL after 10 s)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            stop_process(proc, 10)

    def close(self) -> None:
        self.stop()
        with contextlib.suppress(OSError):
            shutil.rmtree(self._dir)

    def __enter__(self) -> RedisServer:
        self.start()
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
