"""The report as a person opens it at 1400x900 in headless Chromium: the answer in the
first screen, a table of contents that stays in view, offline and without errors."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from report_cdp import Browser

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "report"))
from infersight.diagnose import embed_diagnosis
from infersight.report import write_report
from infersight_testkit.synthetic_runs import make_run

pytestmark = pytest.mark.needs("chromium")

_GEOMETRY = """JSON.stringify((() => {
  const box = (el) => { const r = el.getBoundingClientRect();
    return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; };
  const answer = document.querySelector('#run-0-answer + .answer');
  const toc = document.querySelector('nav.toc');
  return {answer: box(answer), toc: box(toc), inner: window.innerHeight,
          width: window.innerWidth, height: document.documentElement.scrollHeight,
          answerText: answer.innerText, links: toc.querySelectorAll('a').length,
          scrollY: window.scrollY};
})())"""


async def test_answer_first_and_contents_in_view(tmp_path: Path) -> None:
    run = make_run(900, levels=(1, 4, 16), seed=3, run_id="sweep", model="SmolLM2-135M 8k v2")
    run.config["slo"] = {"ttft_p99": 3.0, "itl_p99": 0.05}
    embed_diagnosis(run)
    html_path, _ = write_report(run, tmp_path / "r.html")
    async with Browser(width=1400, height=900) as b:
        page = await b.open(html_path.as_uri())
        first = json.loads(await page.evaluate(_GEOMETRY))
        # the answer is on the first screen, whole, and names the best point and the fix
        assert first["width"] == 1400 and first["inner"] == 900
        assert 0 <= first["answer"]["top"] < first["answer"]["bottom"] <= first["inner"]
        text = first["answerText"]
        assert "Best operating point" in text and "meeting TTFT p99 < 3s and ITL p99 < 50ms" in text
        assert "Main verdict" in text and "Fix" in text
        assert first["toc"]["left"] < first["answer"]["left"]  # beside the page, not over it
        assert first["links"] >= 12
        # scrolled far down: the page is long, the contents are still on screen
        assert first["height"] > 3 * first["inner"]
        await page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
        later = json.loads(await page.evaluate(_GEOMETRY))
        assert later["scrollY"] > 2 * first["inner"]
        assert later["answer"]["bottom"] < 0  # the answer scrolled away...
        assert (
            later["toc"]["top"] >= 0 and later["toc"]["bottom"] <= later["inner"]
        )  # ...the TOC did not
        # a contents link scrolls to its section
        await page.evaluate("document.querySelector('nav.toc a[href=\"#run-0-cost\"]').click()")
        top = await page.evaluate(
            "document.getElementById('run-0-cost').getBoundingClientRect().top"
        )
        assert abs(top) < 5
        assert page.errors() == []
        assert page.requested_urls() == [html_path.as_uri()]  # nothing fetched


async def test_a_narrow_window_keeps_the_answer_on_top(tmp_path: Path) -> None:
    run = make_run(300, levels=(1, 4), seed=4, run_id="narrow")
    embed_diagnosis(run)
    html_path, _ = write_report(run, tmp_path / "r.html")
    async with Browser(width=800, height=900) as b:
        page = await b.open(html_path.as_uri())
        geo = json.loads(await page.evaluate(_GEOMETRY))
        # the contents go above the page; the answer still starts on the first screen
        assert geo["toc"]["bottom"] <= geo["answer"]["top"] < geo["inner"]
        assert page.errors() == []
