"""A bench run of the embedded engine stores the CPU peaks it measured and the floors
it computed; `diagnose` of the saved file reuses them instead of measuring the machine
that reads it (docs/design.md section 1: the file alone gives the same numbers)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from typer.testing import CliRunner

from infersight.cli._app import app
from infersight.core.records import load_run_result, save_run_result
from infersight.diagnose.physics import Device

pytestmark = [pytest.mark.engine, pytest.mark.timeout(240)]


def _floor_evidence(verdicts: list[dict[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {}
    for v in verdicts:
        for e in v["evidence"]:  # type: ignore[attr-defined]
            if e["name"] in ("ITL floor", "TTFT floor (prefill)", "recommended slots"):
                out[f"{v['level']}/{e['name']}"] = e["value"]
    return out


def test_bench_stores_peaks_and_diagnose_of_the_file_reuses_them(tmp_path: Path) -> None:
    from infersight.bench import BenchConfig
    from infersight.entrypoints.bench import bench_and_diagnose

    cfg = BenchConfig(
        progress=False,
        diagnose=True,
        engine_parallel=2,
        engine_ctx=2 * 256,
        concurrency=[8],
        duration=4.0,
        max_tokens=4,
        input_tokens="fixed:24",
        sample_interval=0.25,
        grace=2.0,
    )
    result = bench_and_diagnose(cfg)
    phys = result.environment.get("physics")
    assert isinstance(phys, dict), result.notes
    device = Device.from_dict(phys["device"])
    assert device.kind == "cpu" and device.measured and phys["device_origin"] == "measured"
    assert set(phys["floors"]) == {"c=8"} and phys["floors"]["c=8"]["itl_floor_s"] > 0
    embedded = _floor_evidence([v.model_dump(mode="json") for v in result.diagnosis])
    assert embedded["c=8/ITL floor"] == phys["floors"]["c=8"]["itl_floor_s"]

    # A reader of the file (any machine) shows the run's own numbers and measures nothing.
    path = save_run_result(result, tmp_path / "result.json")
    res = CliRunner().invoke(app, ["diagnose", str(path), "--json"])
    assert res.exit_code == 0, res.output
    again = orjson.loads(res.stdout)["verdicts"]
    assert _floor_evidence(again) == embedded
    notes = [str(e["value"]) for v in again for e in v["evidence"] if e["name"] == "note"]
    assert any(n.startswith("device peaks as stored in the run (measured on ") for n in notes)
    assert not any("measured now" in n for n in notes)
    loaded = load_run_result(path)
    assert Device.from_dict(loaded.environment["physics"]["device"]) == device
