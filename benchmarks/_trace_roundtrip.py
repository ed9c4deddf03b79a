"""Round trip for `trace_replay.py`: traffic sent through `infersight gateway` (its own
process, over a fake engine), its access log replayed at 1x through a second gateway,
and the two logs compared: requests per second, and the prompt and output lengths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson

from infersight.bench import BenchConfig, run
from infersight_testkit import FakeConfig, FakeOpenAI
from infersight_testkit.cli_process import interrupt, start_cli


def _through_gateway(upstream: str, log: Path, cfg: dict[str, Any]) -> Any:
    with log.open("w") as out:
        proc, _, url = start_cli(
            "--upstream", f"fake={upstream},models=fake,concurrency=256", "--port", "0", stdout=out
        )  # type: ignore[arg-type]
        try:
            return run(
                BenchConfig(
                    url=url,
                    model="fake",
                    ignore_eos=True,
                    progress=False,
                    diagnose=False,
                    no_scrape=True,
                    **cfg,
                )
            )
        finally:
            interrupt(proc, 20)


def _lines(path: Path) -> list[dict[str, Any]]:
    out = [orjson.loads(x) for x in path.read_text().splitlines() if x.strip()]
    return sorted(out, key=lambda d: d["arrival_ts"])


def round_trip(tmp: Path, rate: float, seconds: float) -> dict[str, Any]:
    log1, log2 = tmp / "original.jsonl", tmp / "replayed.jsonl"
    fake = FakeConfig(ttft=0.02, itl=0.005, tokens=512)
    with FakeOpenAI.subprocess(fake) as srv:
        _through_gateway(
            srv.base_url,
            log1,
            {
                "rate": [rate],
                "arrival": "poisson",
                "duration": seconds,
                "input_tokens": "lognormal:400:250",
                "output_tokens": "uniform:8:96",
                "seed": 7,
            },
        )
        original = _lines(log1)
        result = _through_gateway(srv.base_url, log2, {"trace": str(log1)})
    replayed = _lines(log2)[-len(original) :]  # bench's own probe requests came first
    return {"original": original, "replayed": replayed, "result": result}


def per_second(lines: list[dict[str, Any]]) -> np.ndarray:
    t = np.array([d["arrival_ts"] for d in lines])
    t -= t[0]
    return np.bincount(t.astype(int))


def _ks(a: np.ndarray, b: np.ndarray) -> float:
    """The largest gap between the two empirical distribution functions."""
    grid = np.union1d(a, b)
    fa = np.searchsorted(np.sort(a), grid, side="right") / a.size
    fb = np.searchsorted(np.sort(b), grid, side="right") / b.size
    return float(np.max(np.abs(fa - fb)))


def compare(rt: dict[str, Any]) -> list[list[str]]:
    """Rows: figure, original, replayed, replayed / original (or the difference)."""
    a, b = rt["original"], rt["replayed"]
    ca, cb = per_second(a), per_second(b)
    n = min(len(ca), len(cb))
    l1 = float(np.abs(ca[:n] - cb[:n]).sum() / max(1, ca[:n].sum()))
    span_a = a[-1]["arrival_ts"] - a[0]["arrival_ts"]
    span_b = b[-1]["arrival_ts"] - b[0]["arrival_ts"]
    rows = [
        ["requests", str(len(a)), str(len(b)), f"{len(b) / len(a):.3f}"],
        [
            "mean rate (req/s)",
            f"{len(a) / span_a:.2f}",
            f"{len(b) / span_b:.2f}",
            f"{(len(b) / span_b) / (len(a) / span_a):.3f}",
        ],
        ["requests per 1-s bin: total |difference| / total", "", "", f"{l1:.1%}"],
    ]
    off_a = np.array([d["arrival_ts"] - a[0]["arrival_ts"] for d in a])
    off_b = np.array([d["arrival_ts"] - b[0]["arrival_ts"] for d in b])
    d = np.abs(off_b - off_a) * 1e3
    rows.append(
        [
            "arrival offset |difference| p50 / p99 (ms)",
            "",
            "",
            f"{np.percentile(d, 50):.2f} / {np.percentile(d, 99):.2f}",
        ]
    )
    for key in ("prompt_tokens", "completion_tokens"):
        xa = np.array([x[key] for x in a], dtype=float)
        xb = np.array([x[key] for x in b], dtype=float)
        for q in (50, 90, 99):
            pa, pb = np.percentile(xa, q), np.percentile(xb, q)
            rows.append([f"{key} p{q}", f"{pa:.0f}", f"{pb:.0f}", f"{pb / pa:.3f}"])
        rows.append([f"{key}: Kolmogorov-Smirnov distance", "", "", f"{_ks(xa, xb):.3f}"])
    return rows
