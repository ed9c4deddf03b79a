"""The process that computes for a local server: a front that runs its engine in a child
process listening on a port of its own (as `infersight serve` does) is watched through
that child, a plain server through itself."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import psutil
import pytest

from infersight.telemetry.server_process import computing_pid, listening_pid, server_pid

# A front listening on one port, with an "engine" child listening on another and busy.
_FRONT = r"""
import socket, subprocess, sys
front = socket.socket(); front.bind(("127.0.0.1", 0)); front.listen()
child = subprocess.Popen([sys.executable, "-c", sys.argv[1]], stdout=subprocess.PIPE, text=True)
engine_port = child.stdout.readline().strip()
print(front.getsockname()[1], child.pid, engine_port, flush=True)
child.wait()
"""
_ENGINE = r"""
import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True)
end = time.monotonic() + 60
while time.monotonic() < end:
    sum(range(10000))
"""
_PLAIN = r"""
import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True)
time.sleep(60)
"""


def _stop(proc: subprocess.Popen[str]) -> None:
    for kid in psutil.Process(proc.pid).children(recursive=True):
        kid.kill()  # each by its pid: only what this test started
    proc.kill()
    proc.wait(timeout=10)


@pytest.fixture
def front() -> Iterator[tuple[int, int, int, int]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", _FRONT, _ENGINE], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        port, child, engine_port = (int(x) for x in proc.stdout.readline().split())
        yield proc.pid, port, child, engine_port
    finally:
        _stop(proc)


def test_a_front_is_watched_through_its_engine_child(front: tuple[int, int, int, int]) -> None:
    pid, port, child, engine_port = front
    url = f"http://127.0.0.1:{port}/v1"
    assert listening_pid(url) == pid
    assert computing_pid(pid) == child and server_pid(url) == child
    assert listening_pid(f"http://localhost:{engine_port}") == child
    assert computing_pid(child) == child  # the engine itself has nothing behind it


def test_a_plain_server_is_its_own_engine_and_remote_urls_have_none() -> None:
    proc = subprocess.Popen([sys.executable, "-c", _PLAIN], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline())
        assert server_pid(f"http://127.0.0.1:{port}") == proc.pid
    finally:
        _stop(proc)
    assert server_pid("http://10.255.255.1:8000") is None
    assert server_pid("https://api.example.com/v1") is None
