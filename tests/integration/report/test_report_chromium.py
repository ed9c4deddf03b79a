"""The HTML report opened in real headless Chromium: renders, offline, plots drawn."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image as mpimg
from report_cdp import Browser, serve

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "report"))
from infersight.report import render_html
from infersight_testkit.synthetic_runs import make_run

pytestmark = pytest.mark.needs("chromium")


def _png(data: bytes) -> np.ndarray:
    img = mpimg.imread(io.BytesIO(data), format="png")
    return np.asarray(img[..., :3], dtype=np.float64)


async def test_report_renders_offline_with_plots_in_chromium(tmp_path: Path) -> None:
    before = make_run(1500, levels=(1, 4, 16), seed=1, run_id="before", model="SmolLM2 <b>x</b>")
    after = make_run(1500, levels=(1, 4, 16), seed=2, run_id="after", base_itl=0.006)
    html = render_html([before, after])
    n_svg = html.count('<svg class="plot"')
    control = (
        "<!DOCTYPE html><html><head><title>control</title></head><body>"
        '<img src="/pixel.png">'
        '<script>console.error("boom"); undefined_fn();</script></body></html>'
    )
    async with (
        serve({"/report.html": html, "/control.html": control}) as (base, hits),
        Browser() as b,
    ):
        page = await b.open(f"{base}/report.html")
        assert page.errors() == []
        assert page.requested_urls() == [f"{base}/report.html"]
        assert hits == ["/report.html"]  # the server saw the page and nothing else

        dom = await page.evaluate(
            "JSON.stringify({svg: document.querySelectorAll('svg.plot').length,"
            " lines: document.querySelectorAll('svg.plot polyline').length,"
            " title: document.title, h: document.documentElement.scrollHeight,"
            " boxes: Array.from(document.querySelectorAll('svg.plot')).map(s => {"
            "   const r = s.getBoundingClientRect();"
            "   return [r.x, r.y + window.scrollY, r.width, r.height]; })})"
        )
        info = json.loads(dom)
        assert info["svg"] == n_svg >= 2 * 9 + 3  # comparison CDFs per level + each run's plots
        assert info["lines"] > n_svg
        assert info["title"] == "infersight report: before vs after"
        assert "SmolLM2 <b>x</b>" in await page.evaluate("document.body.innerText")

        height = min(int(info["h"]), 9000)
        shot = _png(await page.screenshot(clip_height=height))
        assert shot.shape[0] == height
        background = np.abs(shot - shot[0, 0]).sum(axis=2) < 0.05
        assert background.mean() < 0.9, "the page looks blank"
        drawn = 0
        for x, y, w, h in info["boxes"]:
            if y + h > height:
                continue
            region = shot[int(y) : int(y + h), int(x) : int(x + w)]
            # Axes, grid and text are grey; plotted data is coloured (high saturation).
            saturation = region.max(axis=2) - region.min(axis=2)
            assert (saturation > 0.3).sum() > 50, f"plot at {x:.0f},{y:.0f} looks empty"
            drawn += 1
        assert drawn >= 10

        # Control: the same instruments do see a fetch and console errors when present.
        ctl = await b.open(f"{base}/control.html")
        assert any("boom" in e for e in ctl.errors())
        assert any("undefined_fn" in e for e in ctl.errors())
        assert f"{base}/pixel.png" in ctl.requested_urls()
        assert "/pixel.png" in hits


@pytest.mark.engine
@pytest.mark.slow
async def test_report_of_a_real_bench_run(engine: object, tmp_path: Path) -> None:
    """A RunResult from the real engine: the report shows the console's aggregates."""
    import asyncio
    from html import escape

    from infersight.bench import BenchConfig
    from infersight.entrypoints.bench import bench_and_diagnose
    from infersight.report import write_report
    from infersight.report.sections import fmt_cell

    cfg = BenchConfig(
        url=engine.base_url,  # type: ignore[attr-defined]
        concurrency=[1, 2],
        requests=4,
        max_tokens=8,
        progress=False,
        sample_interval=0.25,
    )
    result = await asyncio.to_thread(bench_and_diagnose, cfg)
    assert [lv["name"] for lv in result.config["levels"]] == ["c=1", "c=2"]
    html_path, md_path = write_report(result, tmp_path / "r.html", markdown=tmp_path / "s.md")
    html, md = html_path.read_text(), md_path.read_text() if md_path else ""
    for name in ("c=1", "c=2"):
        agg = result.aggregates[name]  # what the bench console printed
        assert f">{fmt_cell(agg['ttft']['p99'], 's')}<" in html
        assert f">{fmt_cell(agg['e2e']['p99'], 's')}<" in html
        assert f"| {name} | {agg['requests']['total']:,} |" in md
    assert result.diagnosis, "the report renders the verdicts the run holds"
    for v in result.diagnosis:
        assert escape(v.title) in html
    async with serve({"/r.html": html}) as (base, hits), Browser(height=1600) as b:
        page = await b.open(f"{base}/r.html")
        assert page.errors() == [] and hits == ["/r.html"]
        n = await page.evaluate("document.querySelectorAll('svg.plot polyline').length")
        assert n >= 6
