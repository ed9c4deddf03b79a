"""stop_process: SIGTERM first, SIGKILL for a child that ignores it, never raising."""

from __future__ import annotations

import subprocess
import sys
import time

from infersight.core.processes import stop_process

_IGNORES_TERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)"
)


def test_a_polite_child_stops_on_sigterm() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    t0 = time.monotonic()
    stop_process(proc, grace=10)
    assert proc.returncode == -15 and time.monotonic() - t0 < 5


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace() -> None:
    proc = subprocess.Popen([sys.executable, "-c", _IGNORES_TERM], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    t0 = time.monotonic()
    stop_process(proc, grace=0.5)
    assert proc.returncode == -9 and time.monotonic() - t0 >= 0.5
    proc.stdout.close()


def test_a_child_that_already_exited_is_left_as_it_is() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    proc.wait(10)
    stop_process(proc)
    assert proc.returncode == 3
