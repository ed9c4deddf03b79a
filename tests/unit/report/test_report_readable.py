"""What a reader meets in the HTML report: one title, code as code (escaped first),
evidence with units people read, physics as a folded table, cost in plain words, and
charts that say which axis each series belongs to."""

from __future__ import annotations

import re

from infersight.core.verdicts import Evidence, Verdict, VerdictWindow
from infersight.report import render_html
from infersight.report.physics_html import physics_html
from infersight.report.svg.charts import Series, chart
from infersight.report.verdicts.html import evidence_value_text, inline_html, verdict_box
from infersight_testkit.synthetic_runs import make_run


def test_inline_code_is_escaped_before_it_becomes_code() -> None:
    assert inline_html("raise `--parallel 16` now") == "raise <code>--parallel 16</code> now"
    assert inline_html("`<script>x</script>` & <b>") == (
        "<code>&lt;script&gt;x&lt;/script&gt;</code> &amp; &lt;b&gt;"
    )
    assert inline_html("a lone ` stays") == "a lone ` stays"


def test_evidence_values_read_as_people_read_them() -> None:
    def text(value: object, unit: str) -> str:
        return evidence_value_text(Evidence(name="x", value=value, unit=unit))  # type: ignore[arg-type]

    assert text(0.0344, "s") == "34.4 ms"
    assert text(0.4824, "fraction of its threads") == "48.2% of its threads"
    assert text(0.137, "fraction") == "13.7%"
    assert text(0.88, "% of a core") == "0.88% of a core"
    assert text(8.2785, "x") == "8.28×"
    assert text(1.0, "requests") == "1 request" and text(3, "requests") == "3 requests"
    assert text("unknown", "") == "unknown" and text(None, "s") == "n/a s"


def test_a_long_note_gets_a_row_of_its_own() -> None:
    note = "CPU peaks measured now on the machine reading this run: " + "x " * 40
    v = Verdict(
        id="host_starved",
        title="Host/CPU-starved",
        summary="s",
        window=VerdictWindow(start=0, end=1),
        confidence=0.5,
        evidence=[
            Evidence(key="host_cpu", name="host CPU", value=99.0, unit="%"),
            Evidence(key="note", name="note", value=note, source="diagnose"),
        ],
        fixes=["lower `-t`"],
    )
    html = verdict_box(v, "window 0-1 s")
    assert (
        '<tr data-key="host_cpu"><td class="ev-name">host CPU</td><td class="ev-val num">99%</td>'
        in html
    )
    assert '<tr class="ev-note" data-key="note"><td colspan="3">' in html
    assert "<li>lower <code>-t</code></li>" in html


def test_one_title_physics_folded_and_cost_in_plain_words() -> None:
    run = make_run(200, levels=(1, 4), seed=1, run_id="one", model="SmolLM2-135M-Instruct")
    run.environment["physics"] = {
        "device": {
            "name": "host CPU (2 cores)",
            "memory_bytes": 25e9,
            "bandwidth": 23.8e9,
            "flops": {"bf16": 2.08e11, "fp32": 2.08e11},
            "source": "measured",
        },
        "model": "SmolLM2-135M-Instruct.Q4_1",
        "floors": {"c=1": {"itl_floor_s": 0.00416, "ttft_floor_s": 0.123, "batch": 1.0}},
    }
    html = render_html(run)
    assert len(re.findall(r"<h1[ >]", html)) == 1
    assert '<details class="physics">' in html and '"bandwidth"' not in html
    assert "23.8 GB/s" in html and "208 GFLOP/s (bf16, fp32)" in html and ">4.16 ms<" in html
    # the shipped table lists the embedded engine's model at $0: that is no price
    assert (
        "no price for SmolLM2-135M-Instruct: give one with <code>--price-in</code>/"
        "<code>--price-out</code> or a price file (<code>--prices</code>)"
    ) in html
    two = render_html([run, make_run(200, levels=(1,), seed=2, run_id="two")])
    assert re.findall(r"<h1>([^<]*)", two) == [
        "infersight report: one vs two",
        "Comparison",
        "one",
        "two",
    ]  # each run by its label


def test_physics_of_unknown_shape_is_still_a_table() -> None:
    html = physics_html({"device": {"key": "h100"}, "odd": {"a": 1}, "floors": {}})
    assert (
        "<td>device</td><td>h100</td>" in html and "<td>odd</td><td>{&quot;a&quot;: 1}</td>" in html
    )


def test_two_axes_named_in_the_legend_and_drawn_unlike() -> None:
    svg = chart(
        [
            Series("host CPU", [0, 1], [90, 95]),
            Series("engine CPU (% core)", [0, 1], [180, 190], right=True),
        ],
        title="u",
        y2label="% of one core",
        y2unit="%",
    )
    assert ">host CPU, left axis<" in svg and ">engine CPU (% core), right axis<" in svg
    dashes = re.findall(r'<polyline[^>]*?(stroke-dasharray="[^"]*")?\s*stroke-linejoin', svg)
    assert dashes == ["", 'stroke-dasharray="2 3"']
    one = chart([Series("host CPU", [0, 1], [90, 95])], title="u")
    assert ">host CPU<" in one and "axis<" not in one
