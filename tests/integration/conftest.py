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

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from infersight_testkit.vllm_server import VLLMServer
from support.vllm_servers import SHARED, adopt

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
    "telemetry/test_telemetry_vllm_live.py",
    "diagnose/test_diagnose_stored_engine.py",
    "engine/test_engine_scaling_smoke.py",
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


# -- real vLLM, shared by every test of a session that needs it --------------------------
# One server per setting of ``SHARED`` (about two minutes to start on 2 cores): the tests
# in vllm/ and the exporter's test over vLLM's real /metrics (both heavy, so they run in
# the same session and share it). ``scripts/test.sh`` starts them while the unit tests
# run and names their folder in INFERSIGHT_TEST_VLLM_DIR; a session without it starts
# each on first use and stops it at its end.
_servers: dict[str, VLLMServer] = {}


def vllm_server(name: str) -> VLLMServer:
    """The session's server of ``SHARED[name]``: adopted, or started on first use."""
    if name not in _servers:
        prestarted = os.environ.get("INFERSIGHT_TEST_VLLM_DIR")
        if prestarted:
            _servers[name] = adopt(Path(prestarted) / f"{name}.json")
        else:
            _servers[name] = VLLMServer(SHARED[name]).__enter__()
    return _servers[name]


@pytest.fixture(scope="session", autouse=True)
def _stop_vllm_servers() -> Iterator[None]:
    yield
    for server in _servers.values():
        server.stop()  # an adopted one is left to the script that started it
    _servers.clear()


@pytest.fixture(scope="session")
def vllm_slots() -> VLLMServer:
    return vllm_server("slots_2")


@pytest.fixture(scope="session")
def vllm_kv() -> VLLMServer:
    return vllm_server("kv_16_blocks")
