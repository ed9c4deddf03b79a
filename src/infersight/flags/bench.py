"""The bench configuration, declared once, in typed sections.

Each field is declared here, once, with its default, its constraints and its help
(:func:`~infersight.flags.declare.flag`). From these declarations
:class:`~infersight.bench.config.BenchConfig` reads the ``INFERSIGHT_BENCH_*``
variables and validates, and the CLI makes the options of ``bench`` and ``tune``
(``infersight.cli.flag_options``). Each module of the run receives the section(s) it
reads (``cfg.target``, ``cfg.load``, ...). The sections are frozen plain dataclasses
so that they pickle across ``--workers`` processes and Ray actors; a section built
alone (a library caller, a test) means what the configuration means.

This module imports only core: the CLI imports it at start, and whatever takes a
section sits one step above a leaf, not above the configuration and its trace checks.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Self

from annotated_types import Ge, Gt, Le

from infersight.flags.declare import API_KEY_ENV_HELP, API_KEY_FILE_HELP, URL_HELP, flag

__all__ = [
    "ENDPOINTS",
    "SECTIONS",
    "DistributionSection",
    "LoadSection",
    "OutputSection",
    "ReplaySection",
    "TargetSection",
    "TelemetrySection",
    "WorkloadSection",
]


class _Section:
    """Built from any object with the section's fields as attributes."""

    __slots__ = ()

    @classmethod
    def of(cls, source: Any) -> Self:
        values = {}
        for f in dataclasses.fields(cls):  # type: ignore[arg-type]
            v = getattr(source, f.name)
            # lists become tuples and mappings copies: a section cannot change under
            # the modules that share it
            values[f.name] = tuple(v) if isinstance(v, list) else v
            if isinstance(v, Mapping):
                values[f.name] = dict(v)
        return cls(**values)


@dataclass(frozen=True, slots=True)
class TargetSection(_Section):
    """The server under test and how requests reach it."""

    url: str | None = flag(None, URL_HELP, metavar="URL", show_default="start the embedded engine")
    model: str | None = flag(None, "Model id.", show_default="the first the server lists")
    api_key_env: str | None = flag(None, API_KEY_ENV_HELP, metavar="VAR")
    api_key_file: str | None = flag(None, API_KEY_FILE_HELP, metavar="FILE")
    endpoint: Literal["chat", "completions"] = flag(
        "chat", "The OpenAI API to call (vLLM's /v1/chat/completions and /v1/completions too)."
    )
    stream: bool = flag(True, "Stream responses (needed for TTFT/ITL).")
    timeout: Annotated[float, Gt(0)] = flag(
        600.0, "How long one request may take, from its intended send.", duration=True
    )
    engine_parallel: Annotated[int, Ge(1)] = flag(
        8,
        "Embedded engine: slots, requests decoded together (ignored with --url).",
        names=("--parallel",),
    )
    engine_ctx: int | None = flag(
        None, "Embedded engine: total context in tokens (ignored with --url).", names=("--ctx",)
    )
    #: Kept in the RunResult config so `diagnose` of the file uses it (vLLM exports none).
    engine_slots: Annotated[int, Ge(1)] | None = flag(
        None,
        "The target's slot limit (e.g. vLLM --max-num-seqs), for the diagnosis; without "
        "it, the engine's own export, else inferred from its running count.",
    )


@dataclass(frozen=True, slots=True)
class LoadSection(_Section):
    """How much load, for how long, and the goals adaptive levels search for."""

    concurrency: tuple[int, ...] = flag(
        (),
        "Closed loop: requests kept in flight, one level per value, e.g. 1,4,16.",
        metavar="LIST",
        items=int,
    )
    rate: tuple[float, ...] = flag(
        (),
        "Open loop, constant rate: requests/s per level, e.g. 1,2,4.",
        metavar="LIST",
        items=float,
    )
    #: Set by --rate (constant), --poisson and --burstiness (gamma).
    arrival: Literal["constant", "poisson", "gamma"] = flag(
        "constant", "The arrival process of open-loop levels.", cli=False
    )
    burstiness: Annotated[float, Gt(0)] = flag(
        1.0, "Gamma arrivals: 1 = Poisson, <1 burstier, >1 more even."
    )
    sweep: Literal["auto", "closed"] | None = flag(
        None,
        "'auto': sequential, saturation, then rates in between. 'closed': 1, 2, 4, ... clients "
        "until throughput stops growing twice, with the engine's slots full where known "
        "(the levels the server model needs to check itself).",
        metavar="MODE",
    )
    sweep_levels: Annotated[int, Ge(1), Le(20)] = flag(
        4, "Rates between baseline and saturation for --sweep auto."
    )
    requests: Annotated[int, Ge(1)] | None = flag(
        None,
        "Requests per level (--num-prompts as in vllm bench serve).",
        names=("--requests", "--num-prompts"),
        show_default="64 without --duration",
    )
    duration: Annotated[float, Gt(0)] | None = flag(
        None, "How long each level sends.", duration=True
    )
    warmup: str = flag(
        "auto",
        "Cut from the start of the window: 'auto', a duration ('10s') or a request count ('20').",
        metavar="CUT",
    )
    cooldown: str = flag("auto", "Cut from the end of the window, like --warmup.", metavar="CUT")
    #: Interleaved (all levels, then all again), so comparisons use runs as their units
    #: (docs/design.md section 2).
    repeat: Annotated[int, Ge(1), Le(100)] = flag(
        1, "Run each level N times, interleaved; report A B then compares run against run."
    )
    max_concurrency: Annotated[int, Ge(0)] = flag(
        0,
        "At most this many requests in flight (0 = no cap); the excess waits in the "
        "client and counts in latency.",
    )
    grace: Annotated[float, Ge(0)] = flag(
        5.0, "How long Ctrl-C waits for requests in flight.", duration=True
    )
    slo: Mapping[str, float] = flag(
        help="Goals, e.g. 'ttft_p99<500ms,tpot_p99<50ms' (goodput counts the requests within "
        "them).",
        factory=dict,
        metavar="GOALS",
    )
    find_max: bool = flag(False, "Search the highest rate meeting --slo.")
    find_max_steps: Annotated[int, Ge(1), Le(20)] = flag(5, "Bisection steps for --find-max.")

    @property
    def open_arrival(self) -> str:
        """The arrival process of open-loop levels (``--burstiness`` implies gamma)."""
        return "gamma" if self.arrival == "gamma" or self.burstiness != 1.0 else self.arrival

    def effective_requests(self) -> int | None:
        """Requests per level: 64 when neither a count nor a duration is given."""
        if self.requests is None and self.duration is None:
            return 64
        return self.requests


@dataclass(frozen=True, slots=True)
class WorkloadSection(_Section):
    """What the synthetic or dataset requests contain."""

    input_tokens: str = flag(
        "fixed:64",
        "Prompt lengths: fixed:N, uniform:A:B, normal:M:SD, lognormal:M:SD.",
        metavar="DIST",
    )
    output_tokens: str | None = flag(
        None, "Output lengths (max_tokens per request), same syntax.", metavar="DIST"
    )
    max_tokens: Annotated[int, Ge(1)] = flag(128, "max_tokens when --output-tokens is not given.")
    dataset: str | None = flag(
        None, "OpenAI-messages .jsonl or ShareGPT .json file.", metavar="FILE"
    )
    shared_prefix: Annotated[int, Ge(0)] = flag(
        0, "Tokens of one prefix every synthetic prompt shares."
    )
    ignore_eos: bool = flag(False, "Ask the server to generate max_tokens exactly.")
    seed: int = flag(0, "Seed for prompts, lengths and arrival times.")


@dataclass(frozen=True, slots=True)
class ReplaySection(_Section):
    """A trace replayed at its own times (``--trace``) or conversations (``--sessions``);
    their rules are in :mod:`infersight.bench.replay.rules`."""

    trace: str | None = flag(
        None,
        "Replay a trace at its own times: the gateway's access log, Mooncake JSONL, "
        "BurstGPT CSV, or a CSV of timestamp,input_tokens,output_tokens (detected).",
        metavar="FILE",
    )
    trace_format: Literal["gateway", "mooncake", "burstgpt", "csv"] | None = flag(
        None,
        "The trace's format, instead of detecting it: gateway, mooncake, burstgpt or csv.",
        metavar="FORMAT",
    )
    speedup: tuple[float, ...] = flag(
        (),
        "With --trace: replay this many times faster, one level per value, e.g. 1,2,4.",
        metavar="LIST",
        show_default="1",
        items=float,
    )
    trace_window: str | None = flag(
        None,
        "With --trace: START-END, the part to replay from its first request, e.g. "
        "10m-20m, 90s- or -5m.",
        metavar="RANGE",
        names=("--window",),
    )
    on_bad_line: Literal["error", "skip"] = flag(
        "error",
        "A trace line that cannot be used: refuse the run naming it, or skip and count it.",
    )
    block_size: Annotated[int, Ge(1)] = flag(
        512, "With --trace: tokens a Mooncake hash id stands for."
    )
    sessions: Annotated[int, Ge(1)] | None = flag(
        None,
        "Conversations per level, each turn sent with the whole history and the answers "
        "received (with --concurrency or --rate).",
        metavar="N",
    )
    turns: str = flag(
        "fixed:4",
        "With --sessions: turns per conversation, e.g. fixed:4 or uniform:2:8.",
        metavar="DIST",
    )
    think_time: str = flag(
        "0s",
        "With --sessions: the pause after each answer: 2s, uniform:1s:5s or exponential:3s.",
        metavar="DIST",
    )

    @property
    def active(self) -> bool:
        """A replay or conversation run (its levels build their own requests)."""
        return bool(self.trace or self.sessions)


@dataclass(frozen=True, slots=True)
class DistributionSection(_Section):
    """Where the load comes from: this process, ``--workers`` processes or Ray actors."""

    workers: Annotated[int, Ge(1), Le(64)] = flag(
        1, "Load-generator processes (with --ray: Ray actors across the cluster)."
    )
    ray: str | None = flag(
        None,
        "Run the workers on a Ray cluster: 'auto' (this host's) or HOST:PORT (needs "
        "infersight[ray]).",
        metavar="ADDRESS",
    )
    #: "spread" is Ray's SPREAD.
    ray_strategy: Literal["spread", "strict-spread"] = flag(
        "spread", "With --ray: 'spread' (best effort) or 'strict-spread' (one worker per node)."
    )
    ray_cpus: Annotated[float, Gt(0)] = flag(
        1.0, "With --ray: CPUs each worker reserves (one event loop drives about one core)."
    )
    ray_clock_interval: Annotated[float, Gt(0)] = flag(
        10.0, "Seconds between clock-offset measurements during a level (Ray workers).", cli=False
    )


@dataclass(frozen=True, slots=True)
class OutputSection(_Section):
    """What is printed, written, priced and diagnosed after the run."""

    out: str | None = flag(
        None,
        "Directory for result.json, records.csv and schema.json.",
        metavar="DIR",
        names=("--out", "-o"),
    )
    # The next three are set by vLLM's flags (cli/bench_vllm.py).
    result_filename: str | None = flag(
        None, "The RunResult JSON's file name inside ``out``.", cli=False
    )
    percentile_metrics: tuple[str, ...] = flag(
        (),
        "Extra console lines, as vLLM prints them: mean, median and these percentiles of "
        "these record attributes (ttft, tpot, itl, e2e), per level.",
        cli=False,
    )
    metric_percentiles: tuple[float, ...] = flag(
        (99.0,), "The percentiles of ``percentile_metrics``.", cli=False
    )
    price_in: Annotated[float, Ge(0)] | None = flag(None, "$ per million input tokens.")
    price_out: Annotated[float, Ge(0)] | None = flag(None, "$ per million output tokens.")
    prices: str | None = flag(
        None, "Price table file (TOML, like the shipped prices.toml).", metavar="FILE"
    )
    diagnose: bool = flag(True, "Embed and print the diagnosis.")
    progress: bool = flag(True, "Live progress on the terminal.")


@dataclass(frozen=True, slots=True)
class TelemetrySection(_Section):
    """What is sampled during the run besides the requests."""

    scrape: tuple[str, ...] = flag(
        (),
        "Prometheus /metrics URL to sample every second (repeatable); by default the "
        "target's own /metrics when it answers.",
        metavar="URL",
    )
    no_scrape: bool = flag(False, "Scrape no /metrics (not even the target's own).")
    sample_interval: Annotated[float, Gt(0)] = flag(
        1.0, "Seconds between telemetry samples.", cli=False
    )


#: Each section by the name of the BenchConfig attribute that holds it.
SECTIONS: dict[str, type[_Section]] = {
    "target": TargetSection,
    "load": LoadSection,
    "workload": WorkloadSection,
    "replay": ReplaySection,
    "distribution": DistributionSection,
    "output": OutputSection,
    "telemetry": TelemetrySection,
}

#: ``endpoint`` values: the names and vLLM's paths.
ENDPOINTS = {
    "chat": "chat",
    "completions": "completions",
    "/v1/chat/completions": "chat",
    "/v1/completions": "completions",
    "/chat/completions": "chat",
    "/completions": "completions",
}
