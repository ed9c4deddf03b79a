"""Run the fake OpenAI server in its own process (so its CPU never mixes with the
measured client's), and the ``python -m infersight_testkit.fake.openai`` entry."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import urllib.request
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import orjson

from infersight.core.errors import ConfigError
from infersight.core.processes import stop_process
from infersight_testkit.fake.config import FakeConfig
from infersight_testkit.fake.metrics import DIALECTS

__all__ = ["FakeProcess", "main"]

_READY = "FAKE_OPENAI_LISTENING "


class Serving(Protocol):
    """What :func:`main` runs: a :class:`infersight_testkit.fake.openai.FakeOpenAI`
    (passed in, so that this module and the server's do not import each other)."""

    base_url: str

    def running(self, host: str = ..., port: int = ...) -> AbstractAsyncContextManager[Any]: ...


class FakeProcess:
    """A fake server in a child process: ``base_url``, ``pid``, ``stats()``, ``close()``."""

    def __init__(self, config: FakeConfig, *, startup_timeout: float = 30.0) -> None:
        self.config = config
        self.stderr_tail = ""
        cmd = [
            sys.executable,
            "-m",
            "infersight_testkit.fake.openai",
            "--config-json",
            config.to_json().decode(),
            "--port",
            "0",
        ]
        # stderr goes to a file, not a pipe: a chatty server must never block on it.
        self._stderr = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (closed in close())
        self._proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self.pid = self._proc.pid
        out = self._proc.stdout
        assert out is not None
        line: list[str] = []
        reader = threading.Thread(target=lambda: line.append(out.readline()), daemon=True)
        reader.start()
        reader.join(startup_timeout)
        if not line or not line[0].startswith(_READY):
            self.close(read_stderr=True)
            raise ConfigError(f"fake OpenAI server did not start: {self.stderr_tail}")
        self.base_url = line[0][len(_READY) :].strip()

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        data = orjson.dumps(body) if body is not None else None
        req = urllib.request.Request(self.base_url + path, data=data, method=method)
        with urllib.request.urlopen(req, timeout=10) as r:
            return orjson.loads(r.read())

    def stats(self) -> dict[str, Any]:
        """The server's counters (requests, statuses, max_in_flight, arrivals...)."""
        out: dict[str, Any] = self._call("GET", "/_fake/stats")
        return out

    def set_script(self, script: list[Any]) -> None:
        self._call("POST", "/_fake/script", script)

    def reset(self) -> None:
        self._call("POST", "/_fake/reset", {})

    def set_error_rate(self, rate: float, status: int | None = None) -> None:
        """Answer this share of requests (0..1) with an error (503) from now on."""
        self._call("POST", "/_fake/errors", {"rate": rate, "status": status})

    def close(self, *, read_stderr: bool = False) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 5 s)."""
        p = self._proc
        stop_process(p, 5)
        if p.stdout is not None:
            p.stdout.close()
        if not self._stderr.closed:
            if read_stderr:
                self._stderr.seek(0)
                self.stderr_tail = self._stderr.read()[-2000:].strip()
            self._stderr.close()

    def __enter__(self) -> FakeProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def main(argv: list[str] | None = None, *, server: Callable[[FakeConfig], Serving]) -> None:
    """The ``python -m infersight_testkit.fake.openai`` entry: ``server`` is FakeOpenAI."""
    ap = argparse.ArgumentParser(
        prog="python -m infersight_testkit.fake.openai",
        description="A fake OpenAI-compatible server for tests.",
    )
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--config-json", default=None, help="FakeConfig as JSON")
    ap.add_argument("--ttft", type=float, default=None)
    ap.add_argument("--itl", type=float, default=None)
    ap.add_argument("--tokens", type=int, default=None)
    ap.add_argument(
        "--slots", type=int, default=None, help="at most N generations at once; the rest wait"
    )
    ap.add_argument(
        "--metrics-dialect",
        choices=DIALECTS,
        default=None,
        help="serve /metrics with this engine's metric names",
    )
    ap.add_argument(
        "--compute-knee",
        type=int,
        default=None,
        help="past N generations at once, every step slows by running/N",
    )
    ap.add_argument("--kv-usage", type=float, default=None, help="fixed KV usage 0..1")
    ap.add_argument(
        "--kv-per-running", type=float, default=None, help="KV usage per running request"
    )
    ap.add_argument(
        "--prefill-per-token", type=float, default=None, help="seconds of prefill per prompt token"
    )
    ap.add_argument(
        "--kv-capacity", type=int, default=None, help="KV capacity in tokens (admission limit)"
    )
    ap.add_argument(
        "--kv-mode",
        choices=("reserve", "on_demand"),
        default=None,
        help="KV held from admission (reserve) or as tokens are made, with preemption",
    )
    ap.add_argument(
        "--error-rate", type=float, default=None, help="share of requests answered with an error"
    )
    ap.add_argument("--error-status", type=int, default=None, help="that error's HTTP status")
    ap.add_argument("--error-seed", type=int, default=None, help="seed of the error draws")
    args = ap.parse_args(argv)
    cfg = FakeConfig.from_json(args.config_json) if args.config_json else FakeConfig()
    if args.slots is not None and args.slots < 1:
        ap.error("--slots must be at least 1")
    if args.compute_knee is not None and args.compute_knee < 1:
        ap.error("--compute-knee must be at least 1")
    if args.kv_capacity is not None and args.kv_capacity < 1:
        ap.error("--kv-capacity must be at least 1")
    if args.error_rate is not None and not 0.0 <= args.error_rate <= 1.0:
        ap.error("--error-rate must be between 0 and 1")
    names = (
        "ttft",
        "itl",
        "tokens",
        "slots",
        "compute_knee",
        "metrics_dialect",
        "kv_usage",
        "kv_per_running",
        "prefill_per_token",
        "kv_capacity",
        "kv_mode",
        "error_rate",
        "error_status",
        "error_seed",
    )
    for name in names:
        if getattr(args, name) is not None:
            setattr(cfg, name, getattr(args, name))
    try:
        import uvloop

        uvloop.install()
    except ImportError:
        pass

    async def serve() -> None:
        async with server(cfg).running(args.host, args.port) as srv:
            print(_READY + srv.base_url, flush=True)
            await asyncio.Event().wait()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve())
