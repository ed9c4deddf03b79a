"""The report says which requests each level's figures cover and which levels were
unsustainable (docs/design.md section 2), in the HTML and the Markdown alike."""

from __future__ import annotations

from infersight.core.records import RunResult
from infersight.report import render_html, render_markdown
from infersight.stats.aggregate import Window, aggregate
from support.queue_sim import simulate


def _run() -> RunResult:
    records, aggs, levels = [], {}, []
    for name, rate in (("r=8", 8.0), ("r=33", 33.0)):
        sim = simulate(slots=4, service=0.24, rate=rate, duration=10, seed=int(rate))
        for r in sim.records:
            r.request_id = f"{name}-{r.request_id}"
            r.labels["level"] = name
        records += sim.records
        aggs[name] = aggregate(sim.records, window=Window("auto"), target_rate=rate)
        levels.append({"name": name, "rate": rate})
    small = simulate(slots=4, service=0.24, rate=1e9, duration=8e-9).records[:8]
    for r in small:
        r.request_id, r.labels["level"] = f"c=8-{r.request_id}", "c=8"
    aggs["c=8"] = aggregate(small, window=Window("auto"), target_concurrency=8)
    levels.append({"name": "c=8", "concurrency": 8})
    return RunResult(
        records=records + small, aggregates=aggs, config={"levels": levels, "model": "m"}
    )


def test_html_and_markdown_mark_unsustainable_levels_and_windows() -> None:
    result = _run()
    html = render_html(result)
    md = render_markdown(result)
    a = result.aggregates["r=33"]
    sent, in_stats = a["requests"]["total"], a["requests"]["in_window"]
    assert sent != in_stats
    for text in (html, md):
        assert "in stats" in text and "UNSUSTAINABLE" in text
        assert "r=33 is unsustainable" in text and "Capacity ≈ 16." in text
        assert "r=8 is unsustainable" not in text
        assert f"{in_stats} of {sent} requests" in text
        assert "c=8: no steady state" in text
    assert '<div class="banner bad"><b>Unsustainable:</b> r=33' in html
    assert f"| r=33 | {sent} | {in_stats} |" in md
