"""How the integration tests share the machine's two cores.

Most integration tests wait on real servers far more than they compute. The heavy ones
load the CPU (the embedded engine, the real benchmark tools, a Ray cluster, Chromium
over a bench run) or judge noise (tune's A/A floor, comparisons of repeated runs, a rate
the client cannot reach). ``scripts/test.sh`` runs two pytest sessions side by side:
``-m heavy`` runs the heavy tests one after another, so two of them never meet, and
``-m "not heavy"`` the rest beside them. A heavy test in a file of light ones carries
``@pytest.mark.heavy`` itself. (Not pytest-xdist's ``--dist loadgroup``: with
this pytest its groups are ignored, and a module's fixtures start again on each worker.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).parent

#: Folders whose every test is heavy.
HEAVY_FOLDERS = {"tune", "importers", "vllm"}
#: Heavy files elsewhere (relative to this folder).
HEAVY_FILES = {
    "batch/test_batch_engine.py",
    "bench/test_bench_engine.py",
    "bench/test_bench_ray.py",
    "bench/test_bench_saturation.py",
    "diagnose/test_diagnose_engine.py",
    "diagnose/test_diagnose_stored_engine.py",
    "engine/test_engine_scaling_smoke.py",
    "engine/test_engine_serve_cli.py",
    "engine/test_serve_checks.py",
    "engine/test_serve_fuzz.py",
    "report/test_report_chromium.py",
    "report/test_report_significance.py",
    "report/test_validity_faults.py",
}


def is_heavy(path: Path) -> bool:
    """Whether the tests of this file are heavy (see the module's docstring)."""
    try:
        rel = path.resolve().relative_to(HERE.resolve())
    except ValueError:
        return False
    return rel.parts[0] in HEAVY_FOLDERS or rel.as_posix() in HEAVY_FILES


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "heavy: loads the CPU or judges noise; runs beside no other heavy test"
    )


def pytest_itemcollected(item: pytest.Item) -> None:
    if is_heavy(item.path):
        item.add_marker(pytest.mark.heavy)
