"""stop_process: SIGTERM first, SIGKILL for a child that ignores it, never raising."""

from __future__ import annotations

import os
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
    stop_process(proc, grace=60)
    took = time.monotonic() - t0
    assert proc.returncode == -15  # SIGTERM ended it, not the SIGKILL after the grace
    assert took < 10, f"{took:.1f} s: returned when the child exited, not after the 60 s grace"


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


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # Still listed: a zombie nobody has reaped yet counts as gone.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(")")[-1].split()[0] == "Z"


def test_a_group_stops_with_the_server_its_shell_started() -> None:
    # A shell (the group leader) runs a server that ignores SIGTERM: both end.
    script = f'{sys.executable} -c "{_IGNORES_TERM}" & echo $!; wait'
    proc = subprocess.Popen(
        ["/bin/sh", "-c", script], stdout=subprocess.PIPE, start_new_session=True
    )
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    assert proc.stdout.readline() == b"ready\n"
    stop_process(proc, grace=0.5, group=True)
    assert proc.returncode is not None
    deadline = time.monotonic() + 5
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(child)
    proc.stdout.close()


def test_a_group_whose_leader_already_exited_is_still_stopped() -> None:
    script = f'{sys.executable} -c "import time; time.sleep(60)" & echo $!'
    proc = subprocess.Popen(
        ["/bin/sh", "-c", script], stdout=subprocess.PIPE, start_new_session=True
    )
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    proc.wait(10)  # the shell is gone; its server is not
    assert not _gone(child)
    stop_process(proc, grace=5, group=True)
    deadline = time.monotonic() + 5
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(child)
    proc.stdout.close()
