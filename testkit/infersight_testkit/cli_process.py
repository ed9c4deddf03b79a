"""``infersight gateway`` as its own process, as a user starts it: for the gateway
tests and the trace round-trip benchmark alike."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

__all__ = ["CLI", "interrupt", "start_cli"]

CLI = [sys.executable, "-c", "from infersight.cli import main; main()"]


def start_cli(
    *args: str,
    wait: float = 30,
    env: dict[str, str] | None = None,
    stdout: int = subprocess.PIPE,
) -> tuple[subprocess.Popen[str], str, str]:
    """`infersight gateway ARGS` started: (process, its 'listening on' line, its URL).

    The banner goes to stderr (stdout carries only JSON access lines); the stderr lines
    before it are kept in ``proc.early_stderr``."""
    proc = subprocess.Popen(
        [*CLI, "gateway", *args],
        stdout=stdout,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})},
    )
    lines: list[str] = []

    def read() -> None:
        while line := proc.stderr.readline():  # type: ignore[union-attr]
            lines.append(line)
            if "listening on " in line:
                return

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(wait)
    if not (lines and "listening on http://127.0.0.1:" in lines[-1]):
        proc.kill()
        raise AssertionError(f"no 'listening on' line: {lines}")
    proc.early_stderr = "".join(lines[:-1])  # type: ignore[attr-defined]
    return proc, lines[-1], lines[-1].split("listening on ")[1].split()[0]


def interrupt(proc: subprocess.Popen[str], wait: float) -> int:
    """Ctrl-C; the exit code (-9 when it had to be killed)."""
    proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(wait)
    except subprocess.TimeoutExpired:
        proc.kill()
        return -9
