"""The answer on top of every output, and what the outputs say (and do not say)."""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path
from typing import Any

from infersight.core.records import RunResult
from infersight.core.verdicts import Verdict, VerdictWindow
from infersight.diagnose import embed_diagnosis
from infersight.report import render_html, render_markdown
from infersight.report.headline.answer import build_headline, find_max_text, main_verdict, slo_text
from infersight_testkit.synthetic_runs import make_run

SRC = Path(__file__).resolve().parents[3] / "src" / "infersight"


def _agg(
    tok_s: float,
    ttft99: float,
    itl99: float,
    *,
    sustainable: bool = True,
    flagged: bool = False,
    slo: dict[str, float] | None = None,
) -> dict[str, Any]:
    checks = {}
    for key, limit in (slo or {}).items():
        value = ttft99 if key.startswith("ttft") else itl99
        checks[key] = {"limit": limit, "value": value, "met": value <= limit}
    return {
        "requests": {"ok": 50, "total": 50},
        "request_throughput": tok_s / 40,
        "output_token_throughput": tok_s,
        "ttft": {"p99": ttft99},
        "itl": {"p99": itl99},
        "e2e": {"p99": ttft99 + 1},
        "sustainability": {"judged": True, "sustainable": sustainable},
        "client_limited": {"flag": flagged},
        "slo": {"met": all(c["met"] for c in checks.values()), "checks": checks} if slo else None,
    }


def _verdict(vid: str, level: str, fixes: list[str] | None = None) -> Verdict:
    return Verdict(
        id=vid,
        title=vid.replace("_", " "),
        summary=f"{vid} at {level}",
        window=VerdictWindow(start=0, end=10),
        confidence=0.8,
        level=level,
        fixes=fixes or [f"fix {vid}"],
    )


def test_best_point_per_goal_skips_unsustainable_and_client_limited_levels() -> None:
    slo = {"ttft_p99": 0.5, "itl_p99": 0.03}
    levels = [
        ("c=1", _agg(100, 0.1, 0.01, slo=slo)),
        ("c=4", _agg(300, 0.4, 0.02, slo=slo)),  # best meeting both
        ("c=8", _agg(500, 0.45, 0.05, slo=slo)),  # meets TTFT only
        ("c=16", _agg(900, 0.2, 0.02, slo=slo, flagged=True)),  # the client limited it
        ("r=9", _agg(950, 0.3, 0.01, slo=slo, sustainable=False)),
    ]
    run = RunResult(kind="bench", config={"slo": slo})
    head = build_headline(run, levels, [])
    assert [(p.goal, p.level) for p in head.points] == [
        ("meeting TTFT p99 < 500ms and ITL p99 < 30ms", "c=4"),
        ("meeting TTFT p99 < 500ms", "c=8"),
        ("meeting ITL p99 < 30ms", "c=4"),
    ]
    assert head.points[0].text() == (
        "meeting TTFT p99 < 500ms and ITL p99 < 30ms: c=4 at 7.5 req/s, 300 output tok/s, "
        "TTFT p99 400 ms, ITL p99 20 ms, e2e p99 1.4 s"
    )
    # no goals: the most throughput among the sustainable, unflagged levels
    plain = build_headline(RunResult(kind="bench"), levels, [])
    assert [p.level for p in plain.points] == ["c=8"] and plain.caveat is None
    # nothing qualifies: say why instead of naming a level
    bad = build_headline(RunResult(kind="bench"), levels[3:4], [])
    assert bad.points[0].level is None and "client-limited" in str(bad.caveat)


def test_the_main_verdict_and_its_one_fix() -> None:
    vs = [
        _verdict("under_loaded", "c=1"),
        _verdict("healthy", "c=4"),
        _verdict("slot_bound", "c=16", ["raise --parallel to 16", "add a replica"]),
        _verdict("bandwidth_bound_decode", "c=16"),
    ]
    order = ["c=1", "c=4", "c=16"]
    assert main_verdict(vs, order) is vs[2]  # the limit found at the most load
    head = build_headline(
        RunResult(kind="bench", diagnosis=vs), [(n, _agg(1, 1, 1)) for n in order]
    )
    assert head.verdict is vs[2] and head.fix == "raise --parallel to 16"
    # a verdict that puts the measurement in doubt comes first, wherever it is
    doubt = [*vs, _verdict("client_limited", "c=4")]
    assert main_verdict(doubt, order) is doubt[-1]
    assert main_verdict([_verdict("healthy", "c=1")], order).id == "healthy"  # type: ignore[union-attr]


def test_find_max_and_goals_read_as_sentences() -> None:
    fm = {"slo": {"ttft_p99": 0.5, "e2e_max": 2.0}, "max_rate": 3.14159, "capacity": 4.2}
    assert find_max_text(fm) == (
        "the highest sustainable rate meeting TTFT p99 < 500ms and e2e max < 2s is 3.14 req/s "
        "(capacity without goals: 4.2 req/s)"
    )
    assert find_max_text({**fm, "max_rate": None}).startswith("none of the rates tried meets")
    assert slo_text({"tpot_p50": 0.03}) == "TPOT p50 < 30ms"


def test_markdown_starts_with_the_answer_says_no_price_and_has_no_entities() -> None:
    run = make_run(300, levels=(1, 4), seed=2, run_id="md", model="SmolLM2-135M-Instruct")
    embed_diagnosis(run)
    run.diagnosis[-1].summary += " (lag 9 ms > 5 ms & <b>x</b>)"
    md = render_markdown(run)
    assert not re.search(r"&(gt|lt|amp|quot|#\d+);", md)
    assert "(lag 9 ms > 5 ms & \\<b>x\\</b>)" in md  # as written; tags neutralised
    answer = md.index("**Best operating point**")
    assert answer < md.index("| level |") and md.index("**Main verdict**") < md.index("| level |")
    # the shipped price table lists the embedded model at $0: no "$" column, "no price"
    assert "$/Mtok out" not in md and not re.search(r"\| \$0", md)
    assert "Cost: no price for SmolLM2-135M-Instruct: give one with '--price-in'" in md
    assert "is $0" not in md and "cost recorded" not in md
    run.config.update(price_in=0.5, price_out=1.5)
    priced = render_markdown(run)
    assert "$/Mtok out" in priced and "no price" not in priced


def test_utilisation_keeps_percent_of_a_core_off_the_device_axis() -> None:
    run = make_run(300, levels=(1, 16), seed=5)  # process CPU at 200% of a core
    run.samples = [
        dataclasses.replace(s, value=200.0) if s.name == "process.cpu_percent" else s
        for s in run.samples
    ]
    html = render_html(run)
    svg = html[html.index("Utilisation over time") :]
    svg = svg[: svg.index("</svg>")]
    assert "process CPU, % of one core" in svg  # its own axis, on the right
    left_ticks = [float(t) for t in re.findall(r'text-anchor="end" class="tk">([\d.]+)%<', svg)]
    assert left_ticks and max(left_ticks) <= 100  # the device axis never runs to 200%


def test_no_output_cites_the_design_notes() -> None:
    """Messages, evidence sources and fixes are for users: no "docs/design.md s.2"."""
    found = []
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text())
        docs = {
            id(n.body[0].value)
            for n in ast.walk(tree)
            if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and n.body
            and isinstance(n.body[0], ast.Expr)
        }
        found += [
            f"{path.name}:{n.lineno}"
            for n in ast.walk(tree)
            if isinstance(n, ast.Constant)
            and isinstance(n.value, str)
            and id(n) not in docs
            and "docs/design.md" in n.value
        ]
    assert found == []
    run = make_run(300, levels=(1, 4), seed=6, client_limited=True)
    embed_diagnosis(run)
    sources = {e.source for v in run.diagnosis for e in v.evidence}
    assert sources and not any("docs/design.md" in s for s in sources)
    assert any(v.id == "client_limited" for v in run.diagnosis)


def test_the_model_is_named_as_given() -> None:
    from infersight.diagnose.physics import load_shape
    from infersight.engine import default_model_path

    path = default_model_path()
    shape = load_shape(str(path))
    assert shape.name == path.stem  # not the GGUF's "Smollm2 135M 8k Lc100K Mix1 Ep2"
    run = make_run(200, levels=(1,), model="my-org/Llama-3.1-8B-Instruct-AWQ")
    html = render_html(run)
    assert "my-org/Llama-3.1-8B-Instruct-AWQ" in html


def test_every_verdict_line_names_its_level_and_window() -> None:
    """Levels often share a verdict: each console line and panel says which it is."""
    from rich.console import Console

    from infersight.report import render_console, render_verdicts
    from infersight.stats.aggregate import aggregate

    run = make_run(600, levels=(1, 4, 16), seed=7)
    embed_diagnosis(run)
    run.aggregates = {
        f"c={c}": aggregate(
            [r for r in run.records if r.labels["level"] == f"c={c}"], target_concurrency=c
        )
        for c in (1, 4, 16)
    }
    con = Console(record=True, width=200)
    render_console(run, con)
    text = con.export_text()
    for v in run.diagnosis:
        assert f"{v.title} (level {v.level}, " in text, v.title
    assert text.index("best operating point:") < text.index("level ")  # the answer first
    panels = Console(record=True, width=160)
    render_verdicts(run.diagnosis, console=panels)
    titles = [ln for ln in panels.export_text().splitlines() if ln.startswith("╭")]
    assert len(titles) == len(run.diagnosis)
    assert all(f"· level {v.level}" in t for v, t in zip(run.diagnosis, titles, strict=True))
