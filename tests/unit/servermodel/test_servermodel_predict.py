"""``infersight predict RUN``: the fitted model at other knobs, and one line for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infersight.core.errors import ConfigError
from infersight.core.records import save_run_result
from infersight.core.server_model import SelfCheck
from infersight.servermodel.data import run_data
from infersight.servermodel.fit import fit_model
from infersight.servermodel.predict import forecast
from support.sim_runs import sweep_run


def test_more_slots_predict_more_throughput_with_the_models_error() -> None:
    run = sweep_run(slots=4)
    base = forecast(run)
    wider = forecast(run, slots=8)
    assert base.setting["concurrency"] == 16 and base.basis == "model"
    assert (wider.prediction.throughput or 0) == pytest.approx(
        2 * (base.prediction.throughput or 0), rel=0.05
    )
    assert all(e is not None and e < 0.15 for e in wider.error.values())
    # 8 running where the run had 4: an estimate, with the low end if compute
    # saturated at 4 (then more slots buy little throughput)
    assert wider.basis == "estimate" and any("past the 4 the run had" in n for n in wider.notes)
    low = wider.if_saturated
    assert low is not None and (low.throughput or 0) < 0.8 * (wider.prediction.throughput or 0)
    assert wider.to_dict()["if_saturated"]["throughput"] == low.throughput
    # fewer slots than the run had stay within what it measured
    narrow = forecast(run, slots=2)
    assert narrow.basis == "model" and narrow.if_saturated is None


def test_replicas_split_the_load_and_max_tokens_caps_the_answers() -> None:
    run = sweep_run(slots=4)
    two = forecast(run, replicas=2)
    assert (two.prediction.waiting or 0) < (forecast(run).prediction.waiting or 0)
    short = forecast(run, max_tokens=2)
    assert (short.prediction.e2e_p50 or 1) < (forecast(run).prediction.e2e_p50 or 0)


def test_a_knob_every_level_held_is_not_checked_and_gets_a_range() -> None:
    """The self-check varied the clients, never max_tokens or replicas: a what-if on
    those borrows none of its error; it says so and gives a range instead."""
    run = sweep_run(slots=4, config={"max_tokens": 64})
    same = forecast(run, concurrency=8)
    assert same.error["throughput"] is not None
    assert same.checked_on.startswith("leave-one-level-out on c=1") and "clients" in same.checked_on
    for kw in ({"max_tokens": 8}, {"replicas": 2}):
        fc = forecast(run, **kw)  # type: ignore[arg-type]
        assert fc.error == dict.fromkeys(fc.error)
        assert fc.checked_on.startswith("not checked: ") and fc.basis == "estimate"
        lo, hi = fc.ranges["throughput"]
        assert lo is not None and hi is not None and lo <= (fc.prediction.throughput or 0) <= hi
    assert "max_tokens (the run had 64 in every level)" in forecast(run, max_tokens=8).checked_on


def test_a_kv_capacity_the_run_never_knew_is_one_clear_error() -> None:
    with pytest.raises(ConfigError, match="no KV usage"):
        forecast(sweep_run(slots=4), kv_tokens=800)


@pytest.mark.parametrize(
    ("kw", "text"),
    [
        ({"slots": 0}, "--slots must be a positive number"),
        ({"rate": -1.0}, "--rate must be a positive number"),
        ({"rate": 2.0, "concurrency": 4}, "not both"),
    ],
)
def test_bad_knobs_are_one_clear_error(kw: dict[str, float], text: str) -> None:
    with pytest.raises(ConfigError, match=text):
        forecast(sweep_run(slots=4), **kw)  # type: ignore[arg-type]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The installed ``infersight`` command, as a user runs it."""
    exe = Path(sys.executable).parent / "infersight"
    return subprocess.run(
        [str(exe), "predict", *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_the_command_prints_json_and_fails_in_one_line(tmp_path: Path) -> None:
    path = save_run_result(sweep_run(slots=4), tmp_path / "run.json")
    ok = _cli(str(path), "--slots", "8", "--json")
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)
    assert doc["setting"]["slots"] == 8 and doc["prediction"]["throughput"] > 25
    assert set(doc["error"]) == {"throughput", "ttft_p50", "tpot_p50"}
    foreign = tmp_path / "other.json"
    foreign.write_text('{"benchmarks": []}')
    for args, text in (
        ([str(tmp_path / "missing.json")], "cannot read"),
        ([str(foreign)], "not an infersight RunResult"),
        ([str(path), "--replicas", "0"], "--replicas must be a positive"),
    ):
        bad = _cli(*args)
        assert bad.returncode != 0 and "Traceback" not in bad.stderr
        assert bad.stderr.count("\n") == 1 and text in bad.stderr, bad.stderr


@pytest.mark.parametrize("knee", [None, 4])
def test_past_the_measured_top_the_range_holds_the_truth_both_ways(knee: int | None) -> None:
    """A 4-slot run says nothing of the step time past 4 running: an engine whose step
    stays flat there (no knee) and one whose compute saturates at 4 are both in the
    range of a prediction for 8 slots, and the model's figure lies between."""
    fc = forecast(sweep_run(slots=4, knee=knee), slots=8, concurrency=16)
    truth = sweep_run(slots=8, knee=knee, levels=(16,)).aggregates["c=16"]
    lo, hi = fc.ranges["throughput"]
    assert lo is not None and hi is not None and fc.if_flat is not None
    assert lo <= (fc.prediction.throughput or 0) <= hi
    # each end is the model's figure: 7% above the truth at the saturating end, where
    # the queue simulation stretches the whole request and the model only its steps
    assert lo * 0.9 <= truth["request_throughput"] <= hi * 1.05
    assert hi > 1.5 * lo  # the run cannot tell the two engines apart: the range says so
    assert any("if the step time stays flat past 4" in n for n in fc.notes)
    assert fc.to_dict()["if_flat"]["throughput"] == fc.if_flat.throughput


def test_a_range_s_ends_carry_the_model_s_held_out_error() -> None:
    """Each end of a range is itself the model's figure: it is widened by the
    self-check's error on that figure, and a note says so (relaunched, vLLM's TPOT
    fell 1% below a flat end fitted with a 6% error)."""
    run = sweep_run(slots=4, knee=4)
    exact = forecast(run, slots=8, concurrency=16)  # a simulated run: the fit is exact
    assert not any("widened" in n for n in exact.notes)
    d = run_data(run)
    m = fit_model(d)
    mape = {"throughput": 0.2, "ttft_p50": 0.1, "tpot_p50": 0.05}
    run.server_model, run.self_check = m, SelfCheck(method="leave-one-level-out", mape=mape)
    wide = forecast(run, slots=8, concurrency=16)
    for k, e in mape.items():
        lo, hi = exact.ranges[k]
        assert lo is not None and hi is not None
        assert wide.ranges[k] == pytest.approx((lo * (1 - e), hi * (1 + e)), rel=0.02), k
    assert "widened by the model's held-out error (throughput 20%, ttft_p50 10%" in " ".join(
        wide.notes
    )
