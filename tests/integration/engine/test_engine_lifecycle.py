"""Start-up failures give one clear line; the engine process never outlives its owner."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from infersight.core.errors import ConfigError
from infersight.engine import EmbeddedEngine, EngineStartError
from support.waiting import until_blocking

pytestmark = pytest.mark.engine


def _gone(pid: int) -> bool:
    """Whether the process has ended (a zombie has: only its exit status is left)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_port_in_use_is_one_line() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(EngineStartError) as ei:
            EmbeddedEngine(parallel=1, ctx=512, port=port).start()
    msg = str(ei.value)
    assert f"port {port}" in msg and "in use" in msg and "\n" not in msg


def test_corrupt_gguf_reports_llama_cpp_reason(tmp_path: Path) -> None:
    bad = tmp_path / "broken.Q4_0.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 60)  # right magic, garbage header
    eng = EmbeddedEngine(model=bad, parallel=1, ctx=512)
    assert eng.model_name == "broken"
    with pytest.raises(EngineStartError) as ei:
        eng.start()
    msg = str(ei.value)
    assert "broken.Q4_0.gguf" in msg and "\n" not in msg
    assert "gguf" in msg.lower()  # llama.cpp's own reason is appended
    assert not eng.running


def test_not_a_gguf_fails_before_starting(tmp_path: Path) -> None:
    bad = tmp_path / "model.gguf"
    bad.write_text("<html>404 not found</html>")
    with pytest.raises(ConfigError, match="not a GGUF"):
        EmbeddedEngine(model=bad)


def test_stop_ends_the_process_and_is_idempotent() -> None:
    eng = EmbeddedEngine(parallel=1, ctx=512).start()
    pid = eng.pid
    assert psutil.pid_exists(pid)
    eng.stop()
    until_blocking(lambda: _gone(pid), "the engine process to end", timeout=5)
    assert not eng.running
    eng.stop()  # again: no error


def test_engine_dies_with_its_parent(tmp_path: Path) -> None:
    script = tmp_path / "owner.py"
    script.write_text(
        textwrap.dedent(
            """
            import sys, time
            from infersight.engine import EmbeddedEngine
            eng = EmbeddedEngine(parallel=1, ctx=512).start()
            print(eng.pid, flush=True)
            time.sleep(120)
            """
        )
    )
    owner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None
        line = owner.stdout.readline()
        child = int(line.strip())
        assert psutil.pid_exists(child)
        os.kill(owner.pid, signal.SIGKILL)  # no cleanup code runs in the owner
        owner.wait(10)
        until_blocking(lambda: _gone(child), "the engine to die with its parent", timeout=10)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
