"""stop_process: SIGTERM first, SIGKILL for a child that ignores it, never raising."""

from __future__ import annotations

import os
import subprocess
import sys

from infersight.core.processes import stop_group, stop_process
from support.waiting import until_blocking

_IGNORES_TERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)"
)


def _spied(proc: subprocess.Popen[bytes]) -> list[str]:
    """What stop_process does to ``proc``, in order: ``kill`` and each ``wait(timeout)``
    (the calls are read, so the tests need no clock)."""
    calls: list[str] = []
    wait, kill = proc.wait, proc.kill

    def spy_wait(timeout: float | None = None) -> int:
        calls.append(f"wait({timeout})")
        return wait(timeout)

    def spy_kill() -> None:
        calls.append("kill")
        kill()

    proc.wait, proc.kill = spy_wait, spy_kill  # type: ignore[method-assign]
    return calls


def test_a_polite_child_stops_on_sigterm() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    calls = _spied(proc)
    stop_process(proc, grace=60)
    # SIGTERM ended it within the one wait: no SIGKILL after the grace
    assert proc.returncode == -15 and calls == ["wait(60)"]


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace() -> None:
    proc = subprocess.Popen([sys.executable, "-c", _IGNORES_TERM], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
    calls = _spied(proc)
    stop_process(proc, grace=0.5)
    # the grace was waited out, then SIGKILL ended it
    assert proc.returncode == -9 and calls == ["wait(0.5)", "kill", "wait(5)"]
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
    until_blocking(lambda: _gone(child), "the shell's server to be gone")
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
    until_blocking(lambda: _gone(child), "the group's server to be gone")
    proc.stdout.close()


def test_a_server_another_process_started_stops_by_its_group() -> None:
    # `setsid` runs it in a session of its own and the shell that started it exits: the
    # server is no child of ours (as the tests' vLLM servers, which a script starts).
    script = f'setsid {sys.executable} -c "{_IGNORES_TERM}" >/dev/null & echo $!'
    out = subprocess.run(["/bin/sh", "-c", script], stdout=subprocess.PIPE, check=True)
    server = int(out.stdout.split()[0])
    until_blocking(lambda: os.getpgid(server) == server, "the server to lead its own group")
    stop_group(server, grace=0.5)  # it ignores SIGTERM: SIGKILL after the grace
    until_blocking(lambda: _gone(server), "the server to be gone")
