"""`infersight monitor` in a real terminal (tmux), read back with ``capture-pane``: after
a short load the history shows it (sparklines of R, Q, tokens/s, TTFT), the server's
process is listed with its CPU and RSS, and a short terminal keeps the view whole."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI
from realparts import real_part_path
from support.waiting import until_blocking

pytestmark = [pytest.mark.needs("tmux"), pytest.mark.timeout(120)]

CLI = [sys.executable, "-c", "from infersight.cli import main; main()"]


def _tmux(*args: str) -> str:
    tmux = real_part_path("tmux") or "tmux"
    return subprocess.run(
        [tmux, *args], capture_output=True, text=True, check=True, timeout=20
    ).stdout


@contextmanager
def _monitor(url: str, cols: int, lines: int) -> Iterator[str]:
    """``infersight monitor URL`` in a detached tmux window of cols x lines; the
    session's name. A private socket (-L): the user's own tmux server is not touched."""
    name = f"infersight-test-{uuid.uuid4().hex[:8]}"
    cmd = " ".join(shlex.quote(a) for a in [*CLI, "monitor", url, "--interval", "0.25"])
    sock = ["-L", name]
    _tmux(
        *sock,
        "new-session",
        "-d",
        "-s",
        name,
        "-x",
        str(cols),
        "-y",
        str(lines),
        # rich reads COLUMNS/LINES before the terminal: the window's size must win
        f"env -u COLUMNS -u LINES TERM=xterm-256color {cmd}",
    )
    try:
        yield name
    finally:
        subprocess.run(
            [real_part_path("tmux") or "tmux", *sock, "kill-server"],
            capture_output=True,
            timeout=20,
        )


def _screen(name: str) -> list[str]:
    return _tmux("-L", name, "capture-pane", "-p", "-t", name).splitlines()


def _row(screen: list[str], label: str) -> str:
    return next((ln for ln in screen if ln.lstrip("│ ").startswith(label)), "")


def _wait_for(name: str, ok: Callable[[list[str]], object], timeout: float = 40.0) -> list[str]:
    """The screen, once ``ok`` holds on it (the last screen seen if it never does)."""
    last: list[str] = []

    def look() -> list[str]:
        last[:] = _screen(name)
        return list(last) if ok(last) else []

    try:
        return until_blocking(look, "the monitor's screen", timeout, poll=0.3)
    except AssertionError:
        raise AssertionError("\n".join(last)) from None


def test_history_and_processes_after_a_short_load() -> None:
    cfg = FakeConfig(ttft=0.05, itl=0.02, tokens=16, slots=2, metrics_dialect="vllm")
    with FakeOpenAI.subprocess(cfg) as srv, _monitor(srv.base_url, 120, 45) as name:
        _wait_for(name, lambda s: any("History (last" in ln for ln in s))
        load = subprocess.run(
            [
                *CLI,
                "bench",
                "--url",
                srv.base_url,
                "--concurrency",
                "4",
                "--requests",
                "24",
                "--max-tokens",
                "16",
                "--input-tokens",
                "8",
                "--no-progress",
                "--no-diagnose",
            ],
            capture_output=True,
            text=True,
            timeout=90,
            env={**os.environ, "INFERSIGHT_DEBUG": ""},
        )
        assert load.returncode == 0, load.stderr

        def shows_the_load(s: list[str]) -> bool:
            return (
                "█" in _row(s, "running R")
                and "█" in _row(s, "waiting Q")
                and "█" in _row(s, "generated tok/s")
                and "█" in _row(s, "TTFT p50")
            )

        screen = _wait_for(name, shows_the_load)
    text = "\n".join(screen)
    print(text)  # the frame, for the test log
    # four in flight on two slots: Q reached 2, drawn in the history with its peak
    assert "(max 2)" in _row(screen, "waiting Q")
    # the server's own process, with its CPU and memory
    procs = screen.index(next(ln for ln in screen if "Server processes" in ln))
    assert "pid" in screen[procs + 1] and "RSS" in screen[procs + 1]
    assert str(srv.pid) in screen[procs + 2] and "MiB" in screen[procs + 2]
    # the whole frame is on screen: top and bottom borders
    assert screen[0].startswith("╭─ infersight monitor") and any(
        ln.startswith("╰") for ln in screen
    )


def test_a_short_terminal_keeps_the_engine_history_and_processes() -> None:
    cfg = FakeConfig(tokens=4, slots=2, metrics_dialect="vllm")
    with FakeOpenAI.subprocess(cfg) as srv, _monitor(srv.base_url, 100, 24) as name:
        screen = _wait_for(
            name,
            lambda s: (
                any("Server processes" in ln for ln in s) and any(ln.startswith("╰") for ln in s)
            ),
        )
    assert len(screen) <= 24 and screen[0].startswith("╭─ infersight monitor")
    text = "\n".join(screen)
    assert "History (last" in text and "Engine: vLLM" in text
    assert "Host" not in text and "Latency (engine" not in text  # dropped for room
