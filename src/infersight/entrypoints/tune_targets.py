"""What ``tune`` can tune (docs/design.md section 8), each as a target that opens one
setting for a trial and gives bench a URL:

- the embedded engine, started for each trial with the trial's slots (``--parallel``),
  threads and context per slot;
- any server from a ``--launch`` template, restarted for each trial
  (:func:`infersight.tune.launch.launched`);
- a running gateway's per-upstream concurrency limit, set through its
  ``PUT /upstreams/{name}/limit`` with no restart.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

from infersight.bench.runtime import run_coroutine
from infersight.client import Client
from infersight.client.errors_map import is_out_of_memory
from infersight.core.endpoint import Endpoint, server_root, shown_url
from infersight.core.errors import ConfigError, LaunchError, OutOfMemory
from infersight.engine import EngineStartError, default_threads
from infersight.engine.config import DEFAULT_CTX_PER_SLOT, MIN_CTX_PER_SLOT
from infersight.entrypoints.engine import EngineOptions, describe, new_engine, running_engine
from infersight.flags.tune import TuneConfig
from infersight.tune.launch import launched, template_knobs

__all__ = ["Target", "make_target"]

#: The most slots the embedded engine's ladder goes to on this machine's CPU.
_EMBEDDED_MAX_SLOTS = 64
_MAX_CTX_PER_SLOT = 32768


class Target(Protocol):
    """A server whose settings tune changes between trials."""

    knobs: dict[str, tuple[int, int]]
    baseline: dict[str, int]

    def describe(self) -> dict[str, Any]: ...
    def open(
        self, setting: Mapping[str, int], trial_dir: Path
    ) -> contextlib.AbstractContextManager[Endpoint]: ...
    def close(self) -> list[str]: ...


class EmbeddedTarget:
    """The embedded llama.cpp engine, started afresh for each trial."""

    def __init__(self, cfg: TuneConfig) -> None:
        cores = os.cpu_count() or 1
        self.model = cfg.model
        self.knobs = {
            "slots": (1, _EMBEDDED_MAX_SLOTS),
            "threads": (1, cores),
            "ctx": (MIN_CTX_PER_SLOT, _MAX_CTX_PER_SLOT),
        }
        self.baseline = {
            "slots": cfg.slots or 8,
            "threads": cfg.threads or default_threads(),
            "ctx": cfg.ctx or DEFAULT_CTX_PER_SLOT,
        }

    def describe(self) -> dict[str, Any]:
        return {"kind": "embedded", "model": self.model or "the embedded default"}

    @contextlib.contextmanager
    def open(self, setting: Mapping[str, int], trial_dir: Path) -> Iterator[Endpoint]:
        opts = EngineOptions(
            parallel=setting["slots"],
            ctx=setting["ctx"] * setting["slots"],
            threads=setting["threads"],
            model=self.model,
        )
        with contextlib.ExitStack() as stack:
            try:
                engine = stack.enter_context(running_engine(new_engine(opts)))
            except EngineStartError as e:
                if is_out_of_memory(str(e)):
                    raise OutOfMemory(f"the engine ran out of memory while starting: {e}") from None
                raise LaunchError(f"the engine did not start: {e}", reason="exited") from None
            yield describe(engine, "tune")

    def close(self) -> list[str]:
        return []


class LaunchTarget:
    """Any server, from a command template, restarted for each trial."""

    def __init__(self, cfg: TuneConfig) -> None:
        assert cfg.launch is not None
        self.template = cfg.launch
        self.cfg = cfg
        knobs = template_knobs(cfg.launch)
        given = {"slots": cfg.slots, "threads": cfg.threads, "ctx": cfg.ctx}
        missing = [k for k in sorted(knobs) if given[k] is None]
        if missing:
            flag = {
                "slots": "--slots N (the current --max-num-seqs or --parallel)",
                "threads": "--threads N",
                "ctx": "--ctx N (context tokens per slot)",
            }
            raise ConfigError(
                f"--launch has a {missing[0]} placeholder: give its current value "
                f"with {flag[missing[0]]}"
            )
        self.knobs = {k: (1, 1 << 20) for k in knobs}
        self.baseline = {k: v for k, v in given.items() if k in knobs and v is not None}

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "launch",
            "launch": self.template,
            "health_path": self.cfg.health_path,
            "start_timeout_s": self.cfg.start_timeout,
        }

    def open(
        self, setting: Mapping[str, int], trial_dir: Path
    ) -> contextlib.AbstractContextManager[Endpoint]:
        return launched(
            self.template,
            setting,
            log=trial_dir / "server.log",
            start_timeout=self.cfg.start_timeout,
            health_path=self.cfg.health_path,
        )

    def close(self) -> list[str]:
        return []


class GatewayTarget:
    """A running gateway: one upstream's concurrency limit, set between trials."""

    def __init__(self, cfg: TuneConfig, api_key: str | None) -> None:
        assert cfg.url is not None and cfg.upstream is not None
        self.url, self.upstream, self.key = server_root(cfg.url), cfg.upstream, api_key
        stats = self._call("GET", "/stats")
        ups = {u.get("name"): u for u in stats.get("upstreams", []) if isinstance(u, dict)}
        if self.upstream not in ups:
            raise ConfigError(
                f"--upstream {self.upstream}: the gateway has "
                f"{', '.join(sorted(map(str, ups))) or 'no upstreams'}"
            )
        self.original = int(ups[self.upstream].get("limit") or 1)
        self.knobs = {"slots": (1, 4096)}
        self.baseline = {"slots": cfg.slots or self.original}

    def _call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        async def call() -> Any:
            async with Client(self.url, api_key=self.key) as c:
                return await (c.get_json(path) if method == "GET" else c.put_json(path, body))

        doc = run_coroutine(call())
        if not isinstance(doc, dict):
            raise ConfigError(
                f"{shown_url(self.url)}{path} did not answer a JSON object: "
                "is this an infersight gateway?"
            )
        return doc

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "gateway",
            "url": shown_url(self.url),
            "upstream": self.upstream,
            "limit_before": self.original,
        }

    @contextlib.contextmanager
    def open(self, setting: Mapping[str, int], trial_dir: Path) -> Iterator[Endpoint]:
        self._call("PUT", f"/upstreams/{self.upstream}/limit", {"concurrency": setting["slots"]})
        yield Endpoint.given(self.url)

    def close(self) -> list[str]:
        """Put the limit back to its value before tune."""
        self._call("PUT", f"/upstreams/{self.upstream}/limit", {"concurrency": self.original})
        return [
            f"the gateway's limit for {self.upstream} is back at {self.original} (now a "
            "static limit: an adaptive limiter comes back with the gateway's config)"
        ]


def make_target(cfg: TuneConfig, api_key: str | None) -> Target:
    """The target the flags name."""
    if cfg.target_kind == "launch":
        return LaunchTarget(cfg)
    if cfg.target_kind == "gateway":
        return GatewayTarget(cfg, api_key)
    return EmbeddedTarget(cfg)
