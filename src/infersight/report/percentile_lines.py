"""``--percentile-metrics`` / ``--metric-percentiles`` (vllm bench serve's flags): the
mean, the median and the asked percentiles of each metric, per level, in ms.

The values are those of the report and the tables: each level's window (the requests
sent inside it), successful requests, ITL pooled and token-weighted, percentiles by
numpy's default (linear) method.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from rich.console import Console
from rich.markup import escape

from infersight.core.records import RunResult
from infersight.report.view import LevelView, build_view
from infersight.stats.chunks import FloatArray

__all__ = ["percentile_lines", "render_percentiles"]

_LABEL = {"ttft": "TTFT", "tpot": "TPOT", "itl": "ITL", "e2e": "E2EL"}


def _values(lv: LevelView, metric: str) -> FloatArray:
    if metric == "itl":
        vals, weights = lv.itl()
        return np.repeat(vals, weights.astype(np.int64))
    return lv.ok_values(metric)


def _q(q: float) -> str:
    return f"p{q:g}"


def percentile_lines(
    result: RunResult, metrics: Sequence[str], percentiles: Sequence[float]
) -> list[str]:
    """One line per level: ``c=4: TTFT mean 71.5, median 73.9, p99 79.5 ms; ...``."""
    out = []
    for lv in build_view(result).levels:
        parts = []
        for m in metrics:
            v = _values(lv, m) * 1e3
            if not v.size:
                parts.append(f"{_LABEL.get(m, m)} no samples")
                continue
            qs = ", ".join(
                f"{_q(q)} {x:.4g}"
                for q, x in zip(percentiles, np.percentile(v, percentiles), strict=True)
            )
            parts.append(
                f"{_LABEL.get(m, m)} mean {v.mean():.4g}, median {np.median(v):.4g}, {qs} ms"
            )
        out.append(f"{lv.name}: " + "; ".join(parts))
    return out


def render_percentiles(
    result: RunResult, metrics: Sequence[str], percentiles: Sequence[float], console: Console
) -> None:
    """Print :func:`percentile_lines` under a heading."""
    console.print(
        "[bold]percentiles[/] (as vllm bench serve's --percentile-metrics; "
        "ms, over each level's window):",
        highlight=False,
    )
    for line in percentile_lines(result, metrics, percentiles):
        console.print("  " + escape(line), highlight=False)
