"""One load-generator process against a fast paced upstream, beside a bare aiohttp loop.

Used by ``loadgen_capacity.py`` (not run by itself). The upstream is the fake OpenAI
server answering like a fast engine (TTFT 20 ms, then 15 more tokens 5 ms apart: 16
streamed tokens), in its own process pinned to the first core; the load generator
runs in this process, pinned to the second core, so each side has a core of its own
(when the machine has two). Both clients send the same open-loop schedule (evenly
spaced at the rate) to the same server:

- ``infersight``: ``infersight.bench.run`` as the CLI runs it (records, telemetry,
  the steady-state window, the client-limited check), one process;
- ``bare aiohttp``: the floor any aiohttp client pays: one ``session.post`` per
  intended send time (waited for with the same precise timer), ``iter_any()`` to the
  end, nothing recorded but the send lag.

Per run: the rate achieved, schedule lag (send time minus intended send time) p50 /
p99 / max, infersight's client-limited flag, the client's CPU per request and in % of
its core, and the CPU (in cores) that other processes of the machine used meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import cProfile
import io
import os
import pstats
import statistics
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
import orjson
import psutil

from infersight.bench import BenchConfig, run, runner
from infersight.bench.runtime import run_coroutine
from infersight_testkit import FakeConfig, FakeOpenAI
from infersight_testkit.realtime import realtime as sched_fifo

try:  # the module whose run_level the profiler wraps (the runner's, before the split)
    from infersight.bench.level import run as _hot
except ImportError:  # an older infersight on PYTHONPATH (before bench/level/)
    try:
        from infersight.bench import level_run as _hot  # type: ignore[no-redef]
    except ImportError:
        _hot = runner  # type: ignore[assignment]

try:
    from infersight.bench.pacer import Pacer
except ImportError:  # an older infersight on PYTHONPATH (before/after runs)

    class Pacer:  # type: ignore[no-redef]
        async def until(self, at: float) -> None:
            if (delay := at - time.monotonic()) > 0:
                await asyncio.sleep(delay + 0.002)

        def close(self) -> None:
            pass


PACED = FakeConfig(ttft=0.02, itl=0.005, tokens=16, tokenize=False)


def _busy_cores() -> float:
    t = psutil.cpu_times()
    return float(t.user + t.nice + t.system + getattr(t, "irq", 0.0) + getattr(t, "softirq", 0.0))


def _cpu(pid: int) -> float:
    with contextlib.suppress(psutil.Error):
        return float(sum(psutil.Process(pid).cpu_times()[:2]))
    return 0.0


@contextlib.contextmanager
def pinned_upstream(realtime: bool = False) -> Iterator[tuple[str, int, str]]:
    """(base URL, server pid, placement): the server on core 0, this process on core 1.

    ``realtime``: both run under SCHED_FIFO, so other processes of a shared machine
    cannot take their cores (the kernel still keeps 5% of each core for everyone
    else): an approximation of a quiet machine, for root only.
    """
    mine = os.sched_getaffinity(0)
    with FakeOpenAI.subprocess(PACED) as srv:
        pid = srv.pid
        if len(mine) >= 2:
            cores = sorted(mine)
            os.sched_setaffinity(pid, {cores[0]})
            os.sched_setaffinity(0, {cores[1]})
            where = f"upstream on core {cores[0]}, load generator on core {cores[1]}"
        else:
            where = "one core: upstream and load generator share it"
        raised = realtime and sched_fifo(pid) and sched_fifo(0)
        if realtime:
            where += "; both SCHED_FIFO" if raised else "; --realtime refused (needs root)"
        try:
            yield srv.base_url, pid, where
        finally:
            if raised:
                os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
            os.sched_setaffinity(0, mine)


class _Meter:
    """CPU that other processes used during a run, in cores."""

    def __init__(self, server_pid: int) -> None:
        self.server = server_pid
        self.t0 = time.monotonic()
        self.all0, self.srv0, self.me0 = _busy_cores(), _cpu(server_pid), _cpu(os.getpid())

    def others(self) -> float:
        wall = time.monotonic() - self.t0
        ours = (_cpu(self.server) - self.srv0) + (_cpu(os.getpid()) - self.me0)
        return max(0.0, (_busy_cores() - self.all0 - ours) / wall)


@contextlib.contextmanager
def _profiling_levels(prof: cProfile.Profile | None) -> Iterator[None]:
    """Profile only while a level runs (the hot path), not set-up or aggregation."""
    if prof is None:
        yield
        return
    real = _hot.run_level

    async def profiled(*args: Any, **kwargs: Any) -> Any:
        prof.enable()
        try:
            return await real(*args, **kwargs)
        finally:
            prof.disable()

    _hot.run_level = profiled  # type: ignore[assignment]
    try:
        yield
    finally:
        _hot.run_level = real  # type: ignore[assignment]


def run_ours(
    url: str,
    server_pid: int,
    rate: float,
    seconds: float,
    *,
    workers: int = 1,
    profile: bool = False,
) -> dict[str, Any]:
    cfg = BenchConfig(
        url=url,
        rate=[rate],
        duration=seconds,
        max_tokens=16,
        ignore_eos=True,
        input_tokens="16",
        diagnose=False,
        progress=False,
        workers=workers,
    )
    meter = _Meter(server_pid)
    prof = cProfile.Profile() if profile else None
    with _profiling_levels(prof):
        result = run(cfg)
    a = next(iter(result.aggregates.values()))
    level = result.config["levels"][0]
    lags = sorted(r.schedule_lag for r in result.records if r.schedule_lag is not None)
    n = len(result.records)
    return {
        "client": "infersight" if workers == 1 else f"infersight {workers} workers",
        "sent": n,
        "ok": sum(r.ok for r in result.records),
        "achieved": a["achieved_rate"],
        "lag_p50": a["schedule_lag"]["p50"],
        "lag_p99": a["schedule_lag"]["p99"],
        "lag_max": lags[-1] if lags else None,
        "flagged": a["client_limited"]["flag"],
        "reasons": a["client_limited"]["reasons"],
        "cpu_us": 1e6 * level["loadgen_cpu_s"] / max(n, 1),
        "cpu_pct": 100.0 * level["loadgen_cpu_s"] / level["wall_s"] / workers,
        "ttft_p50": a["ttft"]["p50"],
        "others": meter.others(),
        "load": os.getloadavg()[0],
        "profile": prof,
    }


async def _bare(url: str, rate: float, seconds: float) -> tuple[list[float], int, float, float]:
    body = orjson.dumps(
        {
            "model": "fake",
            "messages": [{"role": "user", "content": " ".join(["w"] * 16)}],
            "max_tokens": 16,
            "stream": True,
            "ignore_eos": True,
            "stream_options": {"include_usage": True},
        }
    )
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
    lags: list[float] = []
    ok = 0
    n = int(rate * seconds)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:

        async def one(at: float) -> None:
            nonlocal ok
            lags.append(time.monotonic() - at)
            with contextlib.suppress(aiohttp.ClientError):
                async with session.post(
                    url + "/v1/chat/completions", data=body, headers=headers
                ) as resp:
                    async for _ in resp.content.iter_any():
                        pass
                    ok += resp.status == 200

        pacer = Pacer()
        tasks = []
        t0 = time.monotonic() + 0.05
        c0 = time.process_time()
        for i in range(n):
            at = t0 + i / rate
            await pacer.until(at)
            tasks.append(asyncio.ensure_future(one(at)))
        await asyncio.gather(*tasks)
        pacer.close()
        cpu = time.process_time() - c0
        wall = time.monotonic() - t0
    return lags, ok, cpu, wall


def run_bare(url: str, server_pid: int, rate: float, seconds: float) -> dict[str, Any]:
    meter = _Meter(server_pid)
    lags, ok, cpu, wall = run_coroutine(_bare(url, rate, seconds))
    lags.sort()
    n = len(lags)
    return {
        "client": "bare aiohttp",
        "sent": n,
        "ok": ok,
        "achieved": n / seconds,
        "lag_p50": lags[n // 2],
        "lag_p99": lags[min(n - 1, int(n * 0.99))],
        "lag_max": lags[-1],
        "flagged": None,
        "reasons": [],
        "cpu_us": 1e6 * cpu / max(n, 1),
        "cpu_pct": 100.0 * cpu / wall,
        "ttft_p50": None,
        "others": meter.others(),
        "load": os.getloadavg()[0],
        "profile": None,
    }


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e3:.2f}"


def print_runs(runs: list[dict[str, Any]]) -> None:
    head = (
        f"{'client':<24}{'sent':>7}{'ok':>7}{'req/s':>8}{'lag p50':>9}{'p99 ms':>8}"
        f"{'max':>8}{'flagged':>8}{'CPU us/req':>11}{'CPU %':>7}{'others':>7}{'load':>6}"
    )
    print(head + "\n" + "-" * len(head))
    for r in runs:
        flag = "-" if r["flagged"] is None else ("YES" if r["flagged"] else "no")
        print(
            f"{r['client']:<24}{r['sent']:>7}{r['ok']:>7}{r['achieved'] or 0:>8.0f}"
            f"{_ms(r['lag_p50']):>9}{_ms(r['lag_p99']):>8}{_ms(r['lag_max']):>8}{flag:>8}"
            f"{r['cpu_us']:>11.0f}{r['cpu_pct']:>7.0f}{r['others']:>7.2f}{r['load']:>6.1f}"
        )
    for r in runs:
        for why in r["reasons"]:
            print(f"   {r['client']} flagged: {why}")


def summarise(runs: list[dict[str, Any]], rate: float) -> None:
    ours = [r for r in runs if r["client"] == "infersight"]
    bare = [r for r in runs if r["client"] == "bare aiohttp"]
    if not ours or not bare:
        return
    med = statistics.median
    o99, b99 = med(r["lag_p99"] for r in ours), med(r["lag_p99"] for r in bare)
    ocpu, bcpu = med(r["cpu_us"] for r in ours), med(r["cpu_us"] for r in bare)
    held = sum(1 for r in ours if not r["flagged"] and r["lag_p99"] < 0.005)
    print(
        f"medians: lag p99 infersight {o99 * 1e3:.2f} ms, bare aiohttp {b99 * 1e3:.2f} ms; "
        f"CPU per request infersight {ocpu:.0f} us, bare {bcpu:.0f} us "
        f"(infersight/bare {ocpu / bcpu:.2f})"
    )
    print(
        f"--rate {rate:g} held (lag p99 < 5 ms, not flagged) in {held} of {len(ours)} runs; "
        f"'others' > 0.2 cores means the machine was not quiet"
    )


def print_profile(prof: cProfile.Profile, top: int = 30) -> None:
    """The hot path of the profiled run, by time spent in each function itself."""
    out = io.StringIO()
    stats = pstats.Stats(prof, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    print("\n## profile of the infersight run (cProfile, sorted by own time)")
    text = out.getvalue()
    print(text[text.find("ncalls") - 3 :] if "ncalls" in text else text)
