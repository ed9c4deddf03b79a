"""The report renders what a RunResult holds: it never imports diagnose at run time."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from infersight.core.records import save_run_result
from infersight_testkit.synthetic_runs import make_run

CHECK = """
import sys
from infersight.report import load_results, render_console, render_html, render_markdown
from infersight.report import render_verdicts, write_outputs
from rich.console import Console
(run,) = load_results([sys.argv[1]])
assert run.diagnosis, "the file holds verdicts"
html, md = render_html(run), render_markdown(run)
assert run.diagnosis[0].title in html
render_console(run, Console(file=open("/dev/null", "w")))
render_verdicts(run.diagnosis, console=Console(file=open("/dev/null", "w")))
write_outputs(run, sys.argv[2])
print(sorted(m for m in sys.modules if m.startswith("infersight.diagnose")))
"""


def test_rendering_a_stored_run_imports_no_diagnose_module(tmp_path: Path) -> None:
    path = save_run_result(make_run(300, levels=(1, 4)), tmp_path / "run.json")
    p = subprocess.run(
        [sys.executable, "-c", CHECK, str(path), str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"
    assert (tmp_path / "out" / "records.csv").exists()
