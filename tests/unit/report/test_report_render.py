"""The HTML page and Markdown summary: content, escaping, self-containment, CLI."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from infersight.core.records import RequestRecord, RunResult, load_run_result, save_run_result
from infersight.core.verdicts import Verdict
from infersight.report import render_html, render_markdown, write_report
from infersight.report.markdown import md_cell
from infersight.report.sections import fmt_cell
from infersight.report.view import build_view
from infersight_testkit.synthetic_runs import make_run, sample_verdict

EVIL = '<script>alert("x")</script>'


def _evil_run() -> RunResult:
    run = make_run(300, levels=(2,), model=f"llama{EVIL}", run_id=f"run{EVIL}", error_rate=0.2)
    for r in run.records:
        r.labels["level"] = f"c=2{EVIL}"
        if not r.ok:
            r.error_message = f"upstream said {EVIL} | pipe"
    run.config["levels"] = [{"name": f"c=2{EVIL}", "concurrency": 2}]
    v = sample_verdict(0, 1)
    v["summary"] = f"summary {EVIL}"
    v["fixes"] = [f"fix {EVIL}"]
    v["evidence"][0]["source"] = EVIL
    run.diagnosis = [Verdict.model_validate(v)]
    run.notes = [f"note {EVIL}"]
    run.environment["host"] = EVIL
    return run


def test_user_strings_are_escaped_in_html() -> None:
    html = render_html(_evil_run())
    assert "<script" not in html.lower()
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in html
    # Every escaped place: model, run id, level, error message, verdict, note, environment.
    assert html.count("&lt;script&gt;") >= 8


def test_markdown_escapes_html_and_pipes() -> None:
    md = render_markdown(_evil_run())
    assert not re.search(r"(?<!\\)<script", md)  # every tag start backslash-escaped
    # no HTML entities: a backslash neutralises what could start a tag, and a ">" or a
    # lone "&" stays as written
    assert "&lt;" not in md and "&gt;" not in md and "&amp;" not in md
    assert md_cell("a|b\nc<d> & 9 ms > 5 ms &amp;") == "a\\|b c\\<d> & 9 ms > 5 ms \\&amp;"
    for line in md.splitlines():
        if line.startswith("| level"):
            n = line.count(" | ")
        if line.startswith("| c=2"):
            assert line.replace("\\|", "").count(" | ") == n  # escaped pipes keep the columns


def test_html_is_self_contained() -> None:
    html = render_html([make_run(600, seed=1), make_run(600, seed=2, run_id="b")])
    # No script, stylesheet, image, font or frame reference to anything outside the file.
    assert not re.search(r"<(script|img|iframe|object|embed|link rel=\"stylesheet\")", html, re.I)
    assert "@import" not in html and "url(" not in html
    urls = set(re.findall(r"(?:src|href)=\"([^\"]*)\"", html))
    ids = {"#" + i for i in re.findall(r" id=\"([^\"]*)\"", html)}
    assert urls - ids == {"data:,"}  # the icon, and links to the page's own sections
    assert {"#comparison", "#run-0", "#run-1-answer", "#definitions"} <= urls
    assert set(re.findall(r"https?://[^\"' <]+", html)) == {"http://www.w3.org/2000/svg"}


def test_secrets_in_config_are_redacted() -> None:
    run = make_run(200, levels=(1,))
    html = render_html(run)
    assert "sk-this-must-never-appear" not in html
    assert "sk-this-must-never-appear" not in render_markdown(run)
    assert "max_tokens" in html  # ordinary settings still shown


def test_html_has_every_section_and_the_aggregate_numbers() -> None:
    run = make_run(1500, levels=(1, 4, 16), seed=5)
    view = build_view(run)
    html = render_html(run)
    for heading in (
        "Verdicts",
        "Load levels",
        "Throughput against latency",
        "Latency distributions",
        "Timeline",
        "Percentiles per level",
        "Errors",
        "Cost",
        "Versions",
        "Environment",
        "Definitions",
    ):
        assert f">{heading}</h" in html, heading
    assert html.count('<svg class="plot"') == 2 + 3 + 4  # tput/latency, CDFs, timeline
    for lv in view.levels:
        for key in ("ttft", "itl", "e2e"):
            for q in ("p50", "p99", "p99.9"):
                assert f">{fmt_cell(lv.agg[key][q], 's')}<" in html
        assert f">{lv.agg['requests']['total']:,}<" in html
    assert "Queueing: slot-bound" in html and "raise --parallel from 8 to 16" in html
    assert "RateLimited" in html and "TruncatedStream" in html
    assert "Client-limited" not in html and "Partial run" not in html


def test_banners_for_client_limited_and_partial_runs() -> None:
    run = make_run(300, levels=(4,), client_limited=True)
    run.partial = True
    html = render_html(run)
    assert "Client-limited run:" in html and "schedule lag p99 20.1 ms" in html
    assert "Partial run:" in html
    md = render_markdown(run)
    assert "Client-limited run" in md and "Partial run" in md


def test_comparison_table_in_html_and_markdown() -> None:
    before = make_run(800, levels=(1, 8), seed=7, run_id="before")
    after = make_run(800, levels=(1, 8), seed=7, base_itl=0.004, run_id="after")
    html = render_html([before, after])
    assert html.count('<td class="num better">') >= 6
    assert ">Level c=8</h2>" in html and 'id="comparison"' in html
    assert "inconclusive: run more" in html and "no significant difference" in html
    md = render_markdown([before, after])
    assert "### Comparison" in md and "✅" in md
    row = next(line for line in md.splitlines() if line.startswith("| e2e p50"))
    assert "-" in row.split("|")[3] and "%" in row and "✅ better (B/A 0." in row
    row99 = next(line for line in md.splitlines() if line.startswith("| e2e p99"))
    assert "❔ inconclusive: run more" in row99


def test_runs_without_matching_levels_are_listed_never_pooled() -> None:
    a = make_run(400, levels=(1, 2), seed=1, run_id="a")
    b = make_run(400, levels=(4,), seed=2, run_id="b")
    md = render_markdown([a, b])
    assert "levels pooled" not in md and "**Level" not in md
    assert md.count("not comparable: ") == 3  # a's c=1 and c=2, b's c=4


def test_odd_runs_render() -> None:
    empty = RunResult(run_id="empty")
    assert "No failed requests" in render_html(empty)
    rec = RequestRecord(request_id="x", scheduled=1.0, error="ConnectError", status=None)
    failed_only = RunResult(run_id="failed", records=[rec])
    html = render_html(failed_only)
    assert "ConnectError" in html and "no data" in html
    assert render_markdown(failed_only).count("| run |") == 1


def test_a_run_without_verdicts_says_how_to_diagnose_it(tmp_path: Path) -> None:
    run = make_run(400, levels=(2,), diagnosis=[])
    view = build_view(run)
    assert not view.verdicts and view.diagnosis_note.startswith("not diagnosed: run `infersight")
    assert "not diagnosed: run <code>infersight diagnose FILE</code>" in render_html(run)
    # The report command diagnoses such a file first (unless --no-diagnose).
    f = save_run_result(run, tmp_path / "run.json")
    for flag, diagnosed in (("--diagnose", True), ("--no-diagnose", False)):
        out = tmp_path / f"r{flag}.html"
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                "from infersight.cli import main; main()",
                "report",
                str(f),
                "--out",
                str(out),
                flag,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        html = out.read_text()
        assert ('<div class="verdict' in html) is diagnosed
        assert ("diagnosed by <code>infersight report</code>" in html) is diagnosed
        assert ("not diagnosed: run" in html) is not diagnosed
    assert not load_run_result(f).diagnosis  # the file itself is left as it was


def test_write_report_and_cli(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    save_run_result(make_run(300, levels=(1, 4), run_id="base"), a)
    save_run_result(make_run(300, levels=(1, 4), seed=9, run_id="new"), b)
    out, md = tmp_path / "r.html", tmp_path / "s.md"
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from infersight.cli import main; main()",
            "report",
            str(a),
            str(b),
            "--out",
            str(out),
            "--markdown",
            str(md),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().startswith("<!DOCTYPE html>") and "base vs new" in out.read_text()
    assert md.read_text().startswith("## infersight report")
    p_html, p_md = write_report(make_run(100, levels=(1,)), tmp_path / "sub" / "x.html")
    assert p_html.exists() and p_md is None


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such file"),
        ('{"hello": 1}', "not a valid infersight RunResult"),
        ('{"schema_version": 999}', "newer than this infersight"),
        ("not json", "not a valid infersight RunResult"),
    ],
)
def test_cli_bad_input_is_one_line(tmp_path: Path, content: str | None, message: str) -> None:
    f = tmp_path / "in.json"
    if content is not None:
        f.write_text(content)
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from infersight.cli import main; main()",
            "report",
            str(f),
            "--out",
            str(tmp_path / "r.html"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    assert not (tmp_path / "r.html").exists()


def test_cost_from_bench_fields_and_from_flat_prices() -> None:
    """bench's per-level ``cost`` and run-level extra ``cost``; else config prices."""
    run = make_run(400, levels=(1, 4), seed=11)
    run.aggregates = {lv.name: dict(lv.agg) for lv in build_view(run).levels}
    run.aggregates["c=1"]["cost"] = {
        "usd": 1.25,
        "usd_per_million_output_tokens": 37.5,
        "projected_usd_per_day": 4321.0,
    }
    extra = {"model": "gpt-4o", "price_per_million": {"input": 2.5, "output": 10.0, "note": "list"}}
    run.cost = extra
    run = RunResult.from_json_bytes(run.to_json_bytes())  # as read back from result.json
    view = build_view(run)
    c1 = next(lv for lv in view.levels if lv.name == "c=1")
    assert c1.cost == {
        "usd": 1.25,
        "usd_per_million_output_tokens": 37.5,
        "projected_usd_per_day": 4321.0,
    }
    html = render_html(run)
    assert ">$1.25<" in html and ">$37.5<" in html and ">$4,321<" in html
    assert "$2.5/Mtok input, $10.0/Mtok output (list)" in html

    flat = make_run(400, levels=(2,), seed=12, model="my-own-model")
    flat.config["price_in"], flat.config["price_out"] = 1.0, 2.0
    lv = build_view(flat).levels[0]
    ok = [r for r in flat.records if r.ok]
    expect = sum((r.prompt_tokens or 0) * 1.0 + r.output_tokens * 2.0 for r in ok) / 1e6
    assert lv.cost is not None and abs((lv.cost["usd"] or 0) - expect) < 1e-12
    out_tok = sum(r.output_tokens for r in ok)
    assert abs((lv.cost["usd_per_million_output_tokens"] or 0) - expect / out_tok * 1e6) < 1e-9
    assert (lv.cost["projected_usd_per_day"] or 0) > 0

    unpriced = make_run(200, levels=(1,), model="unknown-model-xyz")
    assert build_view(unpriced).levels[0].cost is None
    assert "no price for unknown-model-xyz: give one with <code>--price-in</code>" in render_html(
        unpriced
    )


def test_observed_latency_against_the_physics_floors() -> None:
    v = sample_verdict(0, 1)
    v["level"] = "c=16"
    v["evidence"] += [
        {"name": "ITL p50", "value": 0.0164, "unit": "s", "source": "records"},
        {"name": "ITL floor", "value": 0.004, "unit": "s", "source": "roofline: H100 HBM3"},
        {"name": "ITL / floor", "value": 4.1, "unit": "x", "source": "observed / floor"},
    ]
    run = make_run(300, levels=(16,), diagnosis=[v])
    html = render_html(run)
    assert ">Against the physics floors</h2>" in html
    assert ">16.4 ms<" in html and ">4 ms<" in html and ">4.1×<" in html
    assert "roofline: H100 HBM3" in html
    md = render_markdown(run)
    assert "| c=16 | 16.4 ms | 4 ms | 4.1× | - | - | - |" in md
    bare = make_run(300, levels=(16,))
    assert "No roofline floors" in render_html(bare)


def test_samples_only_recording_still_shows_utilisation() -> None:
    run = make_run(200, levels=(8,))
    samples_only = RunResult(kind="monitor", run_id="mon", samples=run.samples)
    html = render_html(samples_only)
    assert "Utilisation over time" in html and html.count('<svg class="plot"') >= 1
    # The time axis starts at the first sample, not at the raw monotonic clock (5000 s).
    assert ">0</text>" in html and not re.search(r">5\d\d\d</text>", html)
