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

from collections.abc import Iterator
from pathlib import Path

import pytest

from infersight.testing.vllm_server import VLLMServer, VLLMSetting

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


# -- real vLLM, shared by every test of a session that needs it --------------------------
# One server per setting, started on first use (about two minutes on 2 cores): the
# tests in vllm/ and the exporter's test over vLLM's real /metrics (both heavy, so they
# run in the same session and share it). Every limit binds by construction:
# ``--max-num-seqs`` for slots, a KV cache of a few blocks for KV.
#: A 2-sequence server: slot-bound from c=3 on.
SLOTS_2 = VLLMSetting(max_num_seqs=2)
#: 16 sequences, but a KV cache of 16 blocks of 128 tokens (2,048 tokens): requests of
#: 200 prompt tokens that grow by 64 take 2 to 3 blocks each, so about 6 run and vLLM
#: preempts (and later recomputes) a running one when no block is free. Eager: it starts
#: in about 70 s instead of compiling for two minutes, and no prediction compares its
#: steps with a compiled server's.
KV_16_BLOCKS = VLLMSetting(
    max_num_seqs=16, max_model_len=512, kv_blocks=16, extra=("--enforce-eager",)
)

_servers: dict[VLLMSetting, VLLMServer] = {}


def vllm_server(setting: VLLMSetting) -> VLLMServer:
    """The session's server for ``setting``, started on first use."""
    if setting not in _servers:
        _servers[setting] = VLLMServer(setting).__enter__()
    return _servers[setting]


@pytest.fixture(scope="session", autouse=True)
def _stop_vllm_servers() -> Iterator[None]:
    yield
    for server in _servers.values():
        server.stop()
    _servers.clear()


@pytest.fixture(scope="session")
def vllm_slots() -> VLLMServer:
    return vllm_server(SLOTS_2)


@pytest.fixture(scope="session")
def vllm_kv() -> VLLMServer:
    return vllm_server(KV_16_BLOCKS)
