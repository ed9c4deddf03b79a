"""The rules of ``--trace`` and ``--sessions`` and their options, checked when the
configuration is built (docs/design.md section 3): options that clash, options given
without the feature they belong to, and a trace or window that selects nothing (the
checking pass of :mod:`infersight.bench.replay.check`), each one ConfigError line.
"""

from __future__ import annotations

from collections.abc import Callable

from infersight.bench.replay.check import check_trace, check_window, parse_window
from infersight.bench.replay.think import ThinkTime
from infersight.bench.workload import Distribution
from infersight.core.errors import ConfigError
from infersight.flags.bench import ReplaySection

__all__ = ["check_replay"]


def check_replay(cfg: ReplaySection, given: Callable[..., list[str]]) -> None:
    """Raise one ConfigError line for a trace or conversation setting that cannot run;
    ``given(*fields)`` names the flags of those set to something other than the default."""
    if cfg.trace:
        clash = given(
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
        summary = check_trace(cfg.trace, cfg.trace_format, cfg.on_bad_line)
        check_window(summary, parse_window(cfg.trace_window), cfg.trace_window)
    else:
        alone = given("trace_format", "speedup", "trace_window", "on_bad_line", "block_size")
        if alone:
            raise ConfigError(f"{', '.join(alone)} only apply with --trace FILE")
    if cfg.sessions:
        clash = given("dataset", "sweep", "find_max", "requests")
        if clash:
            raise ConfigError(
                f"--sessions N runs N conversations at --concurrency or --rate: "
                f"drop {', '.join(clash)}"
            )
        Distribution.parse(cfg.turns, "--turns")
        ThinkTime.parse(cfg.think_time)
    elif given("turns") or (not cfg.trace and given("think_time")):
        alone = given("turns", "think_time")
        raise ConfigError(
            f"{', '.join(alone)} only apply with --sessions N"
            + ("" if cfg.trace else " (--think-time also with --trace)")
        )
    if cfg.trace:
        ThinkTime.parse(cfg.think_time)  # for turns whose trace gives no think time
