"""Replay timing for `trace_replay.py`: one bursty trace sent by infersight, by AIPerf's
fixed-schedule replay (when it installs) and by a bare asyncio sender, side by side
against the same fast fake server.

Send lag is measured two ways. *Anchored* (AIPerf's definition, `replay_sched_lag`):
each request's send time minus its trace offset, less the smallest such difference of
the run, so a constant start-up delay does not count; it is the one figure all three
senders have. *Absolute* (infersight's schedule lag): the head written minus the
intended instant on the same clock, which a constant delay does not escape.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

from infersight.bench import BenchConfig, run

ROOT = Path(__file__).resolve().parents[1]
AIPERF = ROOT / ".bench-venvs" / "aiperf"
BURST, BURST_S = 100, 0.010


def bursty_trace(path: Path, n: int, rate: float, burst_every: float, seed: int = 0) -> list[float]:
    """Mooncake JSONL of ``n`` requests averaging ``rate``/s: Poisson arrivals plus a
    burst of 100 requests within 10 ms every ``burst_every`` seconds. Returns offsets."""
    rng = np.random.default_rng(seed)
    span = n / rate
    bursts = [b for b in np.arange(burst_every / 2, span, burst_every)]
    base_n = n - BURST * len(bursts)
    base = np.sort(rng.uniform(0, span, size=base_n))
    burst = [b + BURST_S * k / BURST for b in bursts for k in range(BURST)]
    t = np.sort(np.concatenate([base, np.asarray(burst)]))
    with path.open("w") as f:
        for x in t:
            f.write(
                json.dumps(
                    {"timestamp": round(float(x) * 1000, 4), "input_length": 32, "output_length": 2}
                )
                + "\n"
            )
    return [float(x - t[0]) for x in t]


def _p(a: np.ndarray | None, q: float) -> float | None:
    return None if a is None or not a.size else float(np.percentile(a, q))


@dataclass
class Lag:
    """One sender's send lag (seconds): anchored p50/p99, absolute p50/p99, and the
    absolute p99 of the requests inside bursts."""

    tool: str
    sent: int
    anchored: tuple[float | None, float | None]
    absolute: tuple[float | None, float | None] = (None, None)
    burst_p99: float | None = None
    steady_p99: float | None = None
    note: str = ""

    @classmethod
    def of(
        cls,
        tool: str,
        sent: int,
        anchored: np.ndarray,
        absolute: np.ndarray | None,
        in_burst: np.ndarray | None,
        note: str = "",
    ) -> Lag:
        """``in_burst``: which of the (absolute) lags belong to requests in a burst."""
        burst = steady = None
        if absolute is not None and in_burst is not None:
            burst, steady = absolute[in_burst], absolute[~in_burst]
        return cls(
            tool,
            sent,
            (_p(anchored, 50), _p(anchored, 99)),
            (_p(absolute, 50), _p(absolute, 99)),
            _p(burst, 99),
            _p(steady, 99),
            note,
        )

    def row(self) -> list[str]:
        def ms(v: float | None) -> str:
            return "-" if v is None else f"{v * 1e3:.2f}"

        return [
            self.tool,
            str(self.sent),
            ms(self.anchored[0]),
            ms(self.anchored[1]),
            ms(self.absolute[0]),
            ms(self.absolute[1]),
            ms(self.burst_p99),
            ms(self.steady_p99),
            self.note,
        ]


def _anchor(x: np.ndarray) -> np.ndarray:
    return x - x.min() if x.size else x


def _burst_mask(offsets: list[float]) -> np.ndarray:
    o = np.asarray(offsets)
    gaps = np.diff(o, prepend=-1.0, append=1e9)
    return (gaps[:-1] < 2e-4) | (gaps[1:] < 2e-4)  # 100 in 10 ms: 0.1 ms apart


def infersight(url: str, trace: Path, offsets: list[float], workers: int = 1) -> list[Lag]:
    r = run(
        BenchConfig(
            url=url,
            trace=str(trace),
            progress=False,
            diagnose=False,
            ignore_eos=True,
            no_scrape=True,
            workers=workers,
        )
    )
    recs = sorted(r.records, key=lambda x: int(x.labels["line"]))
    sent = np.array([x.sent if x.sent is not None else np.nan for x in recs])
    sched = np.array([x.scheduled for x in recs])
    o = np.asarray(offsets)[: len(recs)]
    ok = np.isfinite(sent)
    burst = _burst_mask(offsets)[: len(recs)]
    cpu = next(iter(r.aggregates.values()))["loadgen_cpu_percent"]
    out = [
        Lag.of(
            f"infersight ({workers} worker{'s' if workers > 1 else ''})",
            int(ok.sum()),
            _anchor((sent - o)[ok]),
            (sent - sched)[ok],
            burst[ok],
            f"CPU {cpu:.0f}% of a core (busiest worker)",
        )
    ]
    if workers > 1:
        for w in sorted({x.labels.get("worker", "0") for x in recs}):
            m = np.array([x.labels.get("worker") == w for x in recs]) & ok
            out.append(
                Lag.of(
                    f"  worker {w}",
                    int(m.sum()),
                    _anchor((sent - o)[m]),
                    (sent - sched)[m],
                    burst[m],
                )
            )
    return out


async def _bare(url: str, offsets: list[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A bare sender: aiohttp, precomputed bodies, loop timers; the head's write time
    from aiohttp's own trace hook."""
    sent: dict[int, float] = {}
    tc = aiohttp.TraceConfig()

    async def on_headers(_s: Any, ctx: Any, _p: Any) -> None:
        sent[ctx.trace_request_ctx["i"]] = time.monotonic()

    tc.on_request_headers_sent.append(on_headers)
    body = {
        "model": "fake",
        "messages": [{"role": "user", "content": "w " * 32}],
        "max_tokens": 2,
        "stream": True,
        "ignore_eos": True,
    }
    async with aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=0), trace_configs=[tc]
    ) as s:

        async def one(i: int) -> None:
            async with s.post(
                url + "/v1/chat/completions", json=body, trace_request_ctx={"i": i}
            ) as r:
                await r.read()

        t0 = time.monotonic() + 0.5
        tasks = []
        for i, off in enumerate(offsets):
            delay = t0 + off - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.ensure_future(one(i)))
        await asyncio.gather(*tasks, return_exceptions=True)
    ids = np.array(sorted(sent), dtype=int)
    at = np.array([t0 + offsets[i] for i in ids])
    return np.array([sent[i] for i in ids]), at, ids


def bare(url: str, offsets: list[float]) -> Lag:
    s, at, ids = asyncio.run(_bare(url, offsets))
    return Lag.of(
        "bare asyncio + aiohttp",
        len(s),
        _anchor(s - at),
        s - at,
        _burst_mask(offsets)[ids],
        "loop timers, bodies prebuilt",
    )


def _tokenizer_home() -> Path:
    """A word-level tokenizer in a Hugging Face cache layout, for AIPerf offline."""
    home = Path(tempfile.mkdtemp(prefix="aiperf-hf-"))
    rev = "0" * 40
    snap = home / "hub" / "models--local--wordtok" / "snapshots" / rev
    snap.mkdir(parents=True)
    (home / "hub" / "models--local--wordtok" / "refs").mkdir()
    (home / "hub" / "models--local--wordtok" / "refs" / "main").write_text(rev)
    code = (
        "from tokenizers import Tokenizer, models, pre_tokenizers\n"
        "from transformers import PreTrainedTokenizerFast\n"
        "t = Tokenizer(models.WordLevel(vocab={'[UNK]': 0, 'w': 1}, unk_token='[UNK]'))\n"
        "t.pre_tokenizer = pre_tokenizers.Whitespace()\n"
        "PreTrainedTokenizerFast(tokenizer_object=t, "
        f"unk_token='[UNK]').save_pretrained({str(snap)!r})\n"
    )
    subprocess.run([str(AIPERF / "bin" / "python"), "-c", code], check=True, capture_output=True)
    return home


def aiperf_available() -> bool:
    if (AIPERF / "bin" / "aiperf").exists():
        return True
    subprocess.run([sys.executable, "-m", "venv", str(AIPERF)], check=True, capture_output=True)
    r = subprocess.run(
        [str(AIPERF / "bin" / "pip"), "install", "-q", "aiperf"], capture_output=True, text=True
    )
    return r.returncode == 0


def aiperf(url: str, trace: Path) -> Lag:
    """AIPerf's fixed-schedule replay of the same trace; its own anchored send lag."""
    art = Path(tempfile.mkdtemp(prefix="aiperf-art-"))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(_tokenizer_home())}
    r = subprocess.run(
        [
            str(AIPERF / "bin" / "aiperf"),
            "profile",
            "-m",
            "fake",
            "--url",
            url,
            "--endpoint-type",
            "chat",
            "--streaming",
            "--input-file",
            str(trace),
            "--custom-dataset-type",
            "mooncake_trace",
            "--fixed-schedule",
            "--tokenizer",
            "local/wordtok",
            "--artifact-dir",
            str(art),
            "--ui-type",
            "none",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    if r.returncode != 0:
        return Lag("AIPerf fixed schedule", 0, (None, None), note="failed: " + r.stderr[-200:])
    sent = len((art / "profile_export.jsonl").read_text().splitlines())
    summary = json.loads((art / "profile_export_aiperf.json").read_text())
    # its records do not name their trace line: its own anchored send lag is quoted
    q = [summary.get(f"replay_sched_lag_p{k}", {}).get("avg") for k in (50, 99)]
    return Lag(
        "AIPerf fixed schedule",
        sent,
        (None if q[0] is None else q[0] / 1e3, None if q[1] is None else q[1] / 1e3),
        note="its own replay_sched_lag",
    )
