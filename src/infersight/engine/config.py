"""The embedded engine's settings: defaults tuned for small CPUs, and validation.

Everything here is plain data so it can travel to the engine's child process as one
JSON line on its stdin (never on the command line, where other users could read an
API key in ``/proc/<pid>/cmdline``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from infersight.core.errors import ConfigError
from infersight.engine.locate import default_model_path, model_alias, validate_gguf
from infersight.engine.threads import default_threads, resolve_wait

__all__ = [
    "DEFAULT_CTX_PER_SLOT",
    "MIN_CTX_PER_SLOT",
    "EngineConfig",
    "default_threads",
    "resolve_config",
]

#: Context per slot when ``ctx`` is not given: room for a chat prompt and an answer.
DEFAULT_CTX_PER_SLOT = 2048
#: Below this a slot cannot hold a short chat template plus a few tokens of answer.
MIN_CTX_PER_SLOT = 128
MAX_PARALLEL = 1024


@dataclass(frozen=True)
class EngineConfig:
    """Resolved settings for one embedded llama.cpp server."""

    model: Path
    alias: str
    parallel: int
    ctx: int
    threads: int
    host: str = "127.0.0.1"
    port: int = 0
    api_key: str | None = field(default=None, repr=False)
    #: llama.cpp prompt batch (logical) and micro-batch (physical) sizes, in tokens.
    n_batch: int = 2048
    n_ubatch: int = 512
    #: HTTP worker threads. Each open connection (streaming or idle keep-alive) holds
    #: one, so there must be more than slots: requests beyond the slots must reach the
    #: engine's own queue (visible as ``llamacpp:requests_deferred``) instead of waiting
    #: unseen in the accept backlog, and ``/metrics`` must stay reachable under load.
    http_threads: int = 64
    #: Host-RAM cache of evicted slots' prompt state (MiB). llama.cpp's default of
    #: 8 GiB is too much for a laptop or a shared box; a small model needs little.
    cache_ram_mib: int = 512
    #: llama.cpp log verbosity: 1 = errors only (quiet), 3 = info, 4 = debug.
    verbosity: int = 1
    #: How compute threads wait for each other (see :mod:`infersight.engine.threads`):
    #: AUTO spins ``omp_spin_count`` turns then sleeps; ACTIVE or PASSIVE as OpenMP.
    omp_wait_policy: str = "AUTO"
    #: ``GOMP_SPINCOUNT`` for the engine process (None: the policy's own).
    omp_spin_count: int | None = None
    #: Where the wait policy came from: default, argument or an environment variable.
    omp_wait_source: str = "default"

    @property
    def ctx_per_slot(self) -> int:
        return self.ctx // self.parallel

    def to_child(self) -> dict[str, Any]:
        """The JSON-able form sent to the child process."""
        d = dataclasses.asdict(self)
        d["model"] = str(self.model)
        return d

    @classmethod
    def from_child(cls, data: dict[str, Any]) -> EngineConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in data.items() if k in names}
        kwargs["model"] = Path(kwargs["model"])
        return cls(**kwargs)


def _positive(value: int | None, flag: str) -> None:
    # bool is an int subclass; True is never a sensible slot or thread count.
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"{flag} must be a whole number >= 1, got {value!r}")


def resolve_config(
    *,
    model: str | Path | None = None,
    parallel: int = 8,
    ctx: int | None = None,
    threads: int | None = None,
    host: str = "127.0.0.1",
    port: int = 0,
    api_key: str | None = None,
    verbose: bool = False,
    http_threads: int | None = None,
    n_batch: int | None = None,
    n_ubatch: int | None = None,
    omp_wait_policy: str | None = None,
    omp_spin_count: int | None = None,
) -> EngineConfig:
    """Fill defaults and check every value; raise ConfigError with the fix.

    ``omp_wait_policy`` (``AUTO``, ``ACTIVE`` or ``PASSIVE``) and ``omp_spin_count``:
    how llama.cpp's compute threads wait for each other at the barrier after every
    operation. Default: the caller's ``OMP_WAIT_POLICY`` / ``GOMP_SPINCOUNT``, else
    AUTO (spin briefly, then sleep); :mod:`infersight.engine.threads` says why.
    """
    _positive(parallel, "--parallel")
    if parallel > MAX_PARALLEL:
        raise ConfigError(f"--parallel {parallel} is too large (at most {MAX_PARALLEL})")
    _positive(ctx, "--ctx")
    _positive(threads, "--threads")
    _positive(http_threads, "http_threads")
    _positive(n_batch, "n_batch")
    _positive(n_ubatch, "n_ubatch")
    if not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigError(f"--port must be between 0 and 65535, got {port!r}")
    if not host or any(c.isspace() for c in host):
        raise ConfigError(f"--host must be a host name or IP address, got {host!r}")
    if api_key is not None and (not api_key or api_key != api_key.strip()):
        raise ConfigError("the API key is empty or has leading/trailing whitespace")

    path = validate_gguf(model) if model is not None else validate_gguf(default_model_path())
    total_ctx = ctx if ctx is not None else DEFAULT_CTX_PER_SLOT * parallel
    if total_ctx // parallel < MIN_CTX_PER_SLOT:
        raise ConfigError(
            f"--ctx {total_ctx} leaves {total_ctx // parallel} tokens per slot with "
            f"--parallel {parallel}; use --ctx {MIN_CTX_PER_SLOT * parallel} or more "
            f"(--ctx is the total context, shared by all slots)"
        )
    wait = resolve_wait(omp_wait_policy, omp_spin_count)
    nb = n_batch or 2048
    nub = min(n_ubatch or 512, nb)
    return EngineConfig(
        model=path,
        alias=model_alias(path),
        parallel=parallel,
        ctx=total_ctx,
        threads=threads or default_threads(),
        host=host,
        port=port,
        api_key=api_key,
        n_batch=nb,
        n_ubatch=nub,
        http_threads=http_threads or max(64, 4 * parallel + 8),
        verbosity=3 if verbose else 1,
        omp_wait_policy=wait.policy,
        omp_spin_count=wait.spin_count,
        omp_wait_source=wait.source,
    )
