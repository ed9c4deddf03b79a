"""``infersight monitor``: live view of GPU, host and an engine, refreshed each round."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import psutil
from rich.console import Console
from rich.live import Live

from infersight.core.errors import ConfigError
from infersight.core.records import Sample
from infersight.monitor.state import MonitorState
from infersight.monitor.view import ViewInfo, render
from infersight.telemetry import EngineScraper, build_recorder, metrics_url
from infersight.telemetry.process_tree import ProcessTree
from infersight.telemetry.server_process import computing_pid, listening_pid

# termios and tty (POSIX only) are imported in _keys, where stdin is a terminal.

__all__ = ["DEFAULT_URLS", "MonitorResult", "default_url", "listening_pid", "run_monitor"]

#: Tried in order when no URL is given: `infersight serve`, then `infersight gateway`
#: (override with INFERSIGHT_TELEMETRY_URLS).
DEFAULT_URLS = ("http://127.0.0.1:8000", "http://127.0.0.1:8090")


@dataclass
class MonitorResult:
    rounds: int
    samples: int
    record: Path | None
    engine: str | None


def _answers(url: str, timeout: float = 0.5) -> bool:
    try:
        with urllib.request.urlopen(metrics_url(url), timeout=timeout) as r:
            return int(r.status) == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def default_url(candidates: list[str] | tuple[str, ...] = DEFAULT_URLS) -> str:
    """The embedded engine or gateway on its default port, or a ConfigError."""
    for url in candidates:
        if _answers(url):
            return url
    ports = " or ".join(urlsplit(u).netloc for u in candidates)
    raise ConfigError(
        f"no engine or gateway answers /metrics on {ports}; pass your engine's URL, "
        "e.g. `infersight monitor http://HOST:PORT`"
    )


@contextlib.contextmanager
def _keys(loop: asyncio.AbstractEventLoop, stop: asyncio.Event) -> Iterator[None]:
    """q quits: put the terminal in cbreak mode while the view is up."""
    if not sys.stdin.isatty():
        yield
        return
    import termios
    import tty

    fd = sys.stdin.fileno()
    old = termios.tcgetattr(fd)

    def on_key() -> None:
        ch = os.read(fd, 1)
        if ch in (b"q", b"Q", b"\x03"):
            stop.set()

    try:
        tty.setcbreak(fd)
        loop.add_reader(fd, on_key)
        yield
    finally:
        loop.remove_reader(fd)
        termios.tcsetattr(fd, termios.TCSADRAIN, old)


async def run_monitor(
    url: str | None,
    *,
    interval: float = 1.0,
    record: str | Path | None = None,
    processes: Mapping[str, int] | None = None,
    gpu: bool = True,
    api_key: str | None = None,
    duration: float | None = None,
    once: bool = False,
    console: Console | None = None,
    scrape_timeout: float = 2.0,
) -> MonitorResult:
    """Show the live view until q, Ctrl-C, SIGTERM or ``duration`` seconds. ``once``
    prints one view after two rounds (so rates exist) and returns. Without a terminal
    (a pipe or a file) every round prints one frame, stamped with its time."""
    console = console or Console()
    # The view shows sampler problems itself; log lines would tear the live display.
    tlog = logging.getLogger("infersight.telemetry")
    old_level = tlog.level
    tlog.setLevel(logging.ERROR)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    # From the start: a SIGTERM at any point stops the loop below, whose exits restore
    # the terminal (cursor, key mode); the default action would leave it as it was.
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    try:
        return await _run(
            url,
            interval,
            record,
            processes,
            gpu,
            api_key,
            duration,
            once,
            console,
            scrape_timeout,
            stop,
        )
    finally:
        tlog.setLevel(old_level)
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)


async def _run(
    url: str | None,
    interval: float,
    record: str | Path | None,
    processes: Mapping[str, int] | None,
    gpu: bool,
    api_key: str | None,
    duration: float | None,
    once: bool,
    console: Console,
    scrape_timeout: float,
    stop: asyncio.Event,
) -> MonitorResult:
    procs = dict(processes or {})
    scraper = EngineScraper(url, api_key=api_key, timeout=scrape_timeout) if url else None
    server: int | None = None
    if scraper is not None and url:
        await scraper.sample()  # detect the engine before naming its process
        role = "gateway" if scraper.engine == "infersight" else "engine"
        pid = listening_pid(url)
        if role not in procs and pid is not None and pid != os.getpid():
            # an engine's process is the one that computes (serve: the llama.cpp child)
            procs[role] = computing_pid(pid) if role == "engine" else pid
        server = pid if pid != os.getpid() else None
    # The file keeps everything; memory holds the last ~50k samples.
    tel = build_recorder(
        interval=interval,
        processes=procs,
        gpu=gpu,
        scrape=[] if scraper is None else [scraper],
        record=record,
        capacity=50_000,
    )
    rec = tel.recorder
    state = MonitorState(cpus=psutil.cpu_count() or 1)
    # The process list: the server listening on the URL and its children (serve's
    # front and its llama.cpp engine; vLLM's API server and engine core).
    tree = ProcessTree(server) if server is not None else None

    def on_round(samples: list[Sample]) -> None:
        if tree is not None:
            state.processes = tree.rows()
        state.update(samples)

    rec.add_listener(on_round)

    live_view = console.is_terminal and not once

    def size() -> tuple[int, int]:
        """The terminal's size for a live view; a pipe gets every section."""
        return (console.width, console.height if live_view else 10_000)

    def info() -> ViewInfo:
        return ViewInfo(
            url=None if scraper is None else scraper.url,
            interval=interval,
            record=None if record is None else str(record),
            gpu_message=tel.gpu_reason if gpu else "disabled (--no-gpu)",
            scrape_error=None if scraper is None else scraper.last_error,
            live=live_view,
            at=None if live_view or once else time.strftime("%H:%M:%S"),
        )

    if once:
        try:
            await rec.sample_once()
            await asyncio.sleep(interval)
            await rec.sample_once()
        finally:
            await rec.stop()
        console.print(render(state, info(), size()))
        return MonitorResult(rec.rounds, len(rec.samples()), _p(record), state.engine)

    loop = asyncio.get_running_loop()
    try:
        with contextlib.ExitStack() as stack:
            if live_view:  # redraw in place; q quits
                stack.enter_context(_keys(loop, stop))
                live = stack.enter_context(Live(console=console, auto_refresh=False, screen=False))
                rec.add_listener(
                    lambda _r: live.update(render(state, info(), size()), refresh=True)
                )
            else:  # a pipe or a file: one frame per round, one after the other
                rec.add_listener(lambda _r: console.print(render(state, info(), size())))
            await rec.start()
            await _until(stop, duration)
    finally:
        await rec.stop()
    return MonitorResult(rec.rounds, len(rec.samples()), _p(record), state.engine)


async def _until(stop: asyncio.Event, duration: float | None) -> None:
    """Wait for ``stop``, or ``duration`` seconds when given."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), duration)


def _p(record: str | Path | None) -> Path | None:
    return None if record is None else Path(record)
