"""The report's evidence as a person reads it in headless Chromium at 800 and 1400 px:
every evidence value on screen and non-empty, no sideways scrolling, one title, code
shown as code. A screenshot of the verdicts is kept as the test's artefact
(``tmp_path/report-verdicts-<width>px.png``; its path is printed)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from report_cdp import Browser

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "report"))
from infersight.core.records import RunResult
from infersight.core.verdicts import Evidence, Verdict, VerdictWindow
from infersight.diagnose import embed_diagnosis
from infersight.report import write_report
from infersight_testkit.synthetic_runs import make_run

pytestmark = pytest.mark.needs("chromium")

#: Every evidence value: is it on screen (the topmost element at its first line),
#: inside the window's width, and not empty? Plus the page's own width.
_CHECK = """JSON.stringify((() => {
  const out = {width: window.innerWidth, scroll: document.documentElement.scrollWidth,
               h1: document.querySelectorAll('h1').length, values: [],
               code: document.querySelectorAll('.verdict code').length,
               ticks: Array.from(document.querySelectorAll('.verdict p, .verdict li'))
                      .filter(e => e.textContent.includes('`')).length,
               legends: Array.from(document.querySelectorAll('svg.plot text.lg'))
                      .map(t => t.textContent)};
  for (const el of document.querySelectorAll('.verdict .ev-val')) {
    el.scrollIntoView({block: 'center'});
    const r = el.getClientRects()[0];
    const hit = r && document.elementFromPoint(r.left + Math.min(4, r.width / 2),
                                               r.top + r.height / 2);
    out.values.push({key: el.closest('tr').dataset.key, text: el.innerText.trim(),
                     left: r ? r.left : -1, right: r ? r.right : 1e9,
                     shown: !!hit && el.contains(hit)});
  }
  return out;
})())"""


def _run() -> RunResult:
    run = make_run(600, levels=(1, 4, 16), seed=7, run_id="evidence", model="SmolLM2-135M-Instruct")
    embed_diagnosis(run)
    # A verdict with what made tables overflow: a long note, a long source, code in a fix.
    run.diagnosis.append(
        Verdict(
            id="host_starved",
            title="Host/CPU-starved",
            window=VerdictWindow(start=5000.0, end=5010.0),
            summary="The engine's threads get 48% of their cores; see `--threads`.",
            evidence=[
                Evidence(
                    key="host_cpu",
                    name="host CPU",
                    value=98.96,
                    unit="%",
                    source="host.cpu_percent{cpu=all}",
                ),
                Evidence(
                    key="itl_floor",
                    name="ITL floor",
                    value=0.00416,
                    unit="s",
                    source="roofline: SmolLM2-135M-Instruct.Q4_1 on host CPU (2 cores): 23.5 "
                    "GiB, 24 GB/s, 0.2 TFLOP/s bf16 (measured)",
                ),
                Evidence(
                    key="note",
                    name="note",
                    unit="",
                    source="diagnose",
                    value="CPU peaks measured now on the machine reading this run (it stored "
                    "none): measured: numpy 64 MiB copy 23.8 GB/s, float32 matmul 104 "
                    "GFLOP/s per core x 2 cores (best of repeats and of earlier runs)",
                ),
            ],
            confidence=0.7,
            fixes=["lower the engine's `-t` to the cores it can really have"],
            engine="embedded",
        )
    )
    return run


@pytest.mark.parametrize("width", [800, 1400])
async def test_every_evidence_value_is_on_screen(tmp_path: Path, width: int) -> None:
    run = _run()
    n_evidence = sum(len(v.evidence) for v in run.diagnosis)
    html_path, _ = write_report(run, tmp_path / "r.html")
    async with Browser(width=width, height=900) as b:
        page = await b.open(html_path.as_uri())
        info = json.loads(await page.evaluate(_CHECK))
        assert info["width"] == width
        assert info["scroll"] <= width, "the page scrolls sideways"
        assert info["h1"] == 1, "one title"
        values = info["values"]
        assert len(values) == n_evidence >= 20
        for v in values:
            assert v["text"] and v["text"] != "-", v
            assert v["left"] >= 0 and v["right"] <= width, v
            assert v["shown"], v
        assert info["code"] >= 2 and info["ticks"] == 0  # `x` is drawn as code, no backticks
        # a chart with two y axes names each series' axis in its legend
        assert any(t.endswith(", right axis") for t in info["legends"])
        assert any(t.endswith(", left axis") for t in info["legends"])
        await page.evaluate("window.scrollTo(0, 0)")
        top = await page.evaluate(
            "document.getElementById('run-0-verdicts').getBoundingClientRect().top + scrollY"
        )
        height = await page.evaluate("document.documentElement.scrollHeight")
        shot = tmp_path / f"report-verdicts-{width}px.png"
        shot.write_bytes(await page.screenshot(clip_height=min(int(top) + 2400, int(height))))
        print(f"screenshot: {shot}")
        assert shot.stat().st_size > 10_000
        assert page.errors() == []
