"""The checks of ``--trace`` and ``--sessions`` and their options, run when the
configuration is built: so a bad trace line, an empty trace or an empty window is one
clear line before anything starts or is sent (docs/design.md section 3)."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from infersight.bench.replay.check import TraceSummary, check_trace, check_window, parse_window
from infersight.bench.replay.think import ThinkTime
from infersight.bench.workload import Distribution
from infersight.core.errors import ConfigError

__all__ = ["ReplaySettings", "check_replay", "trace_summary", "trace_times"]


class ReplaySettings(Protocol):
    """What the checks read of the bench configuration
    (:class:`~infersight.bench.config.BenchConfig`)."""

    @property
    def trace(self) -> str | None: ...
    @property
    def trace_format(self) -> str | None: ...
    @property
    def on_bad_line(self) -> str: ...
    @property
    def trace_window(self) -> str | None: ...
    @property
    def speedup(self) -> list[float]: ...
    @property
    def duration(self) -> float | None: ...
    @property
    def requests(self) -> int | None: ...
    @property
    def sessions(self) -> int | None: ...
    @property
    def turns(self) -> str: ...
    @property
    def think_time(self) -> str: ...

    def given(self, *names: str) -> list[str]:
        """The flags of ``names`` the user set to something other than the default."""


def trace_summary(cfg: ReplaySettings) -> TraceSummary:
    """The checked trace of ``cfg`` (the checking pass runs once per file)."""
    assert cfg.trace is not None
    return check_trace(cfg.trace, cfg.trace_format, cfg.on_bad_line)


def trace_times(cfg: ReplaySettings, speedup: float) -> np.ndarray:
    """The send offsets of one level (seconds from its first send), as the feed will
    produce them: the window, then ``--requests`` and ``--duration``."""
    s = trace_summary(cfg)
    i, j = s.select(parse_window(cfg.trace_window))
    t = s.times[i:j]
    off = (t - t[0]) / speedup if t.size else t
    if cfg.duration is not None:
        off = off[off < cfg.duration]
    if cfg.requests is not None:
        off = off[: cfg.requests]
    return off


def check_replay(cfg: ReplaySettings) -> None:
    """Raise one ConfigError line for a trace or conversation setting that cannot run."""
    if cfg.trace:
        clash = cfg.given(
            "concurrency",
            "rate",
            "sweep",
            "find_max",
            "dataset",
            "sessions",
            "shared_prefix",
            "input_tokens",
            "output_tokens",
            "max_tokens",
        )
        if clash:
            raise ConfigError(
                f"--trace sends each request at the trace's own time and length: drop "
                f"{', '.join(clash)} (scale the times with --speedup, cut with --window)"
            )
        if any(not x > 0 for x in cfg.speedup):
            raise ConfigError("--speedup values must be > 0")
        summary = trace_summary(cfg)
        check_window(summary, parse_window(cfg.trace_window), cfg.trace_window)
    else:
        alone = cfg.given("trace_format", "speedup", "trace_window", "on_bad_line", "block_size")
        if alone:
            raise ConfigError(f"{', '.join(alone)} only apply with --trace FILE")
    if cfg.sessions:
        clash = cfg.given("dataset", "sweep", "find_max", "requests")
        if clash:
            raise ConfigError(
                f"--sessions N runs N conversations at --concurrency or --rate: "
                f"drop {', '.join(clash)}"
            )
        Distribution.parse(cfg.turns, "--turns")
        ThinkTime.parse(cfg.think_time)
    elif cfg.given("turns") or (not cfg.trace and cfg.given("think_time")):
        alone = cfg.given("turns", "think_time")
        raise ConfigError(
            f"{', '.join(alone)} only apply with --sessions N"
            + ("" if cfg.trace else " (--think-time also with --trace)")
        )
    if cfg.trace:
        ThinkTime.parse(cfg.think_time)  # for turns whose trace gives no think time
