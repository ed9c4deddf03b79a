"""The engine's child process: run llama.cpp's HTTP server (xllamacpp) until told to stop.

Protocol with the parent (:mod:`infersight.engine.process`):

- stdin, first line: the :class:`~infersight.engine.config.EngineConfig` as JSON. The
  pipe then stays open; end-of-file means the parent is gone, and the server stops. This
  is how the engine never outlives its parent, even after ``kill -9``.
- stdout: JSON lines, ``{"event": "ready", ...}`` once serving, or
  ``{"event": "error", "message": ...}`` (one clear line) when start-up failed. Native
  code that writes to fd 1 is redirected to stderr so it cannot corrupt this channel.
- stderr: llama.cpp's own log (errors only unless verbose); the parent keeps a tail.
- SIGTERM, SIGINT or SIGHUP: stop cleanly and exit 0.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from typing import IO, Any

from infersight.core.errors import ConfigError
from infersight.core.listen import check_can_listen
from infersight.engine.config import EngineConfig
from infersight.engine.locate import validate_gguf

# xllamacpp is imported inside main's try: a native load that fails becomes one diagnosed line.

__all__ = ["client_url", "main", "openmp_runtime"]

#: Seconds the llama.cpp server gets to stop by itself before the process just exits.
_SHUTDOWN_GRACE_S = 3


def _emit(chan: IO[str], **event: Any) -> None:
    chan.write(json.dumps(event) + "\n")
    chan.flush()


def diagnose_start_failure(cfg: EngineConfig) -> tuple[str, bool]:
    """Why the llama.cpp server refused to start: (one-line message, is_generic).

    xllamacpp only says "Failed to init server"; the usual causes are checked here.
    A generic answer lets the parent append llama.cpp's own error line.
    """
    try:
        validate_gguf(cfg.model)
    except ConfigError as e:
        return str(e), False
    try:
        check_can_listen(cfg.host, cfg.port)
    except ConfigError as e:
        return str(e), False
    return f"llama.cpp failed to start with model {cfg.model.name}", True


def _build_params(cfg: EngineConfig) -> Any:
    import xllamacpp

    p = xllamacpp.CommonParams()
    p.model.path = str(cfg.model)
    p.model_alias = {cfg.alias}  # a set of names; a plain str would become its letters
    p.n_parallel = cfg.parallel
    p.n_ctx = cfg.ctx
    p.n_batch = cfg.n_batch
    p.n_ubatch = cfg.n_ubatch
    p.cont_batching = True
    p.cpuparams.n_threads = cfg.threads
    p.cpuparams_batch.n_threads = cfg.threads
    p.n_threads_http = cfg.http_threads
    p.cache_ram_mib = cfg.cache_ram_mib
    p.endpoint_metrics = True
    p.endpoint_slots = True
    p.hostnames = [cfg.host]
    p.port = cfg.port
    p.verbosity = cfg.verbosity
    if cfg.api_key:
        p.api_keys = [cfg.api_key]
    return p


def openmp_runtime(maps: str | None = None) -> str | None:
    """The OpenMP runtime loaded in this process (libgomp, libomp, libiomp5), if any:
    ``GOMP_SPINCOUNT`` only means something to libgomp."""
    if maps is None:
        try:
            with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
                maps = f.read()
        except OSError:
            return None
    for name in ("libgomp", "libiomp5", "libomp"):
        if f"/{name}" in maps:
            return name
    return None


def _versions() -> dict[str, Any]:
    import xllamacpp

    build = xllamacpp.BUILD_INFO
    return {
        "xllamacpp": getattr(xllamacpp, "__version__", "unknown"),
        "llama.cpp": build.get("commit", "unknown") if isinstance(build, dict) else "unknown",
        "system_info": xllamacpp.get_system_info().strip(),
        "openmp": openmp_runtime(),
    }


def client_url(host: str, listening_address: str) -> str:
    """The URL a local client should use (a wildcard bind is reached via loopback)."""
    port = int(listening_address.rstrip("/").rsplit(":", 1)[1])
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{port}"


def _watch_stdin(stop: threading.Event) -> None:
    # Blocks until the parent closes the pipe or dies; either way it is time to go.
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except (OSError, ValueError):
        pass
    stop.set()


def main() -> int:
    """Entry point of ``python -m infersight.engine --child``."""
    # Keep a private copy of stdout for the protocol, then point fd 1 at stderr.
    chan = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    stop = threading.Event()

    def _on_signal(signum: int, frame: object) -> None:
        stop.set()

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)

    try:
        line = sys.stdin.readline()
        cfg = EngineConfig.from_child(json.loads(line))
    except Exception as e:  # the parent gets one line, not a traceback
        _emit(chan, event="error", message=f"bad engine configuration: {e}", generic=False)
        return 2
    threading.Thread(target=_watch_stdin, args=(stop,), daemon=True, name="stdin-watch").start()

    try:
        validate_gguf(cfg.model)
        import xllamacpp

        t0 = time.monotonic()
        server = xllamacpp.Server(_build_params(cfg))
    except ConfigError as e:
        _emit(chan, event="error", message=str(e), generic=False)
        return 2
    except Exception:  # xllamacpp raises a bare RuntimeError
        message, generic = diagnose_start_failure(cfg)
        _emit(chan, event="error", message=message, generic=generic)
        return 2
    _emit(
        chan,
        event="ready",
        url=client_url(cfg.host, str(server.listening_address)),
        pid=os.getpid(),
        load_seconds=round(time.monotonic() - t0, 3),
        versions=_versions(),
    )
    while not stop.wait(0.5):
        pass
    # Dropping the last reference stops the HTTP server and frees the model. With
    # streams in flight it can block inside native code while holding the GIL (its
    # HTTP workers wait for results that never come once the task queue is stopped),
    # so no Python-level watchdog could run: SIGALRM's default action ends the
    # process instead.
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    signal.alarm(_SHUTDOWN_GRACE_S)
    del server
    chan.close()
    sys.stderr.flush()
    # Skip interpreter teardown: llama.cpp's native threads need no Python cleanup.
    os._exit(0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
