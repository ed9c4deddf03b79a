"""`infersight monitor` end to end: live view in a pseudo-terminal, quit on q and on
Ctrl-C, --record file readable afterwards; `dashboards` and `exporter` commands."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from infersight.core.errors import ConfigError
from infersight.monitor import run_monitor
from infersight.telemetry import read_samples
from support.waiting import until_blocking

CLI = [sys.executable, "-c", "from infersight.cli import main; main()"]


def _spawn_in_pty(args: list[str]) -> tuple[subprocess.Popen[bytes], int]:
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "120", "LINES": "40", "TERM": "xterm"}
    proc = subprocess.Popen(
        [*CLI, *args], stdin=slave, stdout=slave, stderr=slave, env=env, start_new_session=True
    )
    os.close(slave)
    return proc, master


def _read_until(master: int, needle: bytes, timeout: float) -> bytes:
    buf = b""
    deadline = time.monotonic() + timeout
    while needle not in buf and time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                buf += os.read(master, 65536)
            except OSError:
                break
    return buf


def _drain_and_wait(proc: subprocess.Popen[bytes], master: int, timeout: float) -> bytes:
    buf = b""
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 0.1)
        if r:
            try:
                buf += os.read(master, 65536)
            except OSError:
                break
    return buf


#: What a live view records once it has run two rounds: the engine's samples, and the
#: host's and the engine process's CPU shares (the first round has no interval).
WANTED = {
    ("engine.requests_running", ""),
    ("engine.slots", ""),
    ("host.cpu_percent", ""),
    ("process.cpu_percent", "engine"),
}


def _recorded(rec: Path) -> set[tuple[str, str]]:
    """(name, process name) of each sample recorded so far; none before the header."""
    try:
        samples, _ = read_samples(rec)
    except ConfigError:  # not written yet
        return set()
    out = {(s.name, "") for s in samples}
    return out | {(s.name, s.labels.get("name", "")) for s in samples}


@pytest.mark.engine
@pytest.mark.parametrize("how", ["q", "ctrl-c"])
def test_monitor_live_view_quits_cleanly(engine: Any, tmp_path: Path, how: str) -> None:
    rec = tmp_path / "session.jsonl"
    proc, master = _spawn_in_pty(
        [
            "monitor",
            engine.base_url,
            "--interval",
            "0.2",
            "--record",
            str(rec),
            "--no-gpu",
        ]
    )
    try:
        out = _read_until(master, b"llama.cpp", timeout=60)
        assert b"llama.cpp" in out, out[-2000:]
        # the rounds that the assertions below read: CPU shares need a second round
        until_blocking(lambda: _recorded(rec) >= WANTED, "the CPU shares to be recorded")
        if how == "q":
            os.write(master, b"q")
        else:
            os.killpg(proc.pid, signal.SIGINT)  # what the terminal sends on Ctrl-C
        tail = _drain_and_wait(proc, master, timeout=20)
        proc.wait(10)
        assert proc.returncode == 0, (out + tail)[-2000:]
        assert b"Traceback" not in out + tail
        assert b"recorded" in tail
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    _, header = read_samples(rec)
    assert header["interval"] == 0.2
    # the monitor found the engine process by its listening port
    assert _recorded(rec) >= WANTED


@pytest.mark.engine
async def test_monitor_once_renders_engine_and_host(engine: Any) -> None:
    console = Console(record=True, width=140, force_terminal=False)
    res = await run_monitor(engine.base_url, interval=0.2, once=True, console=console, gpu=True)
    text = console.export_text()
    assert res.engine == "llamacpp" and res.rounds == 2
    assert "Engine: llama.cpp" in text
    assert "/ 8 slots" in text
    assert "GPU:" in text  # no GPU here: one line saying why (or a GPU table on a GPU box)
    assert "Host" in text and "CPU" in text


def test_monitor_without_url_and_nothing_on_default_ports() -> None:
    r = subprocess.run([*CLI, "monitor", "--once"], capture_output=True, text=True, timeout=60)
    if r.returncode == 0:
        pytest.skip("something answers on the default port on this machine")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "URL" in lines[0]


def test_dashboards_command(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from infersight.cli._app import app
    from infersight.core.errors import ConfigError

    runner = CliRunner()
    r = runner.invoke(app, ["dashboards", "grafana"])
    assert r.exit_code == 0
    assert json.loads(r.stdout)["uid"] == "infersight-llm"
    out = tmp_path / "rules.yml"
    r = runner.invoke(app, ["dashboards", "alerts", "--out", str(out)])
    assert r.exit_code == 0 and "GpuIdleWhileRequestsWait" in out.read_text()
    r = runner.invoke(app, ["dashboards", "kibana"])
    assert isinstance(r.exception, ConfigError) and "unknown dashboard" in str(r.exception)


def test_exporter_command_serves_and_stops(tmp_path: Path) -> None:
    import socket
    import urllib.request

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = [
        "exporter",
        "--port",
        str(port),
        "--no-gpu",
        "--process",
        f"me={os.getpid()}",
        "--interval",
        "0.2",
    ]
    proc = subprocess.Popen([*CLI, *args], stderr=subprocess.PIPE, text=True)
    try:

        def scrape() -> str:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    body: str = r.read().decode()
            except OSError:
                return ""  # not listening yet
            return body if "infersight_host_cpu_percent" in body else ""

        # CPU percentages need a second round (the first has no interval to measure)
        body = until_blocking(scrape, "the exporter's CPU percentages", timeout=30)
        assert "\ninfersight_host_cpu_percent " in body  # the host total, no cpu label
        assert 'infersight_host_cpu_core_percent{cpu="0"}' in body
        assert f'infersight_process_resident_memory_bytes{{name="me",pid="{os.getpid()}"}}' in body
        assert "infersight_exporter_gpus 0.0" in body  # --no-gpu
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            assert json.loads(r.read())["status"] == "ok"
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(20)
    assert proc.returncode == 0
    assert proc.stderr is not None and "Traceback" not in proc.stderr.read()


def _free_url() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_monitor_sigterm_restores_the_terminal() -> None:
    proc, master = _spawn_in_pty(["monitor", _free_url(), "--no-gpu", "--interval", "0.3"])
    try:
        out = _read_until(master, b"infersight monitor", timeout=60)
        assert b"\x1b[?25l" in out, out[-2000:]  # the live view hid the cursor
        os.kill(proc.pid, signal.SIGTERM)  # a supervisor stopping it, not a Ctrl-C
        out += _drain_and_wait(proc, master, timeout=20)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    assert proc.returncode == 0 and b"Traceback" not in out
    assert out.rfind(b"\x1b[?25h") > out.rfind(b"\x1b[?25l")  # shown again, after the last hide


def test_monitor_without_a_terminal_prints_a_frame_per_interval() -> None:
    url = _free_url()
    r = subprocess.run(
        [*CLI, "monitor", url, "--no-gpu", "--interval", "500ms", "--duration", "3s"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    frames = re.findall(r"infersight monitor\s+every 0\.5 s\s+(\d\d:\d\d:\d\d)", r.stdout)
    assert len(frames) >= 3, r.stdout[-3000:]  # 6 rounds in 3 s; a loaded box may lose some
    assert frames == sorted(frames) and len(set(frames)) >= 2  # one after the other, stamped
    assert "q or Ctrl-C" not in r.stdout  # nothing to press in a pipe
    once = subprocess.run(
        [*CLI, "monitor", url, "--no-gpu", "--once"], capture_output=True, text=True, timeout=60
    )
    assert once.returncode == 0 and once.stdout.count("infersight monitor") == 1
    assert "q or Ctrl-C" not in once.stdout and "Engine:" in once.stdout
