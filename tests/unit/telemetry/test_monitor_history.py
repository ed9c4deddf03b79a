"""The monitor's history: sparklines that fit their width and keep their scale, a few
minutes of points, the busy fraction from what the host has, and the process tree."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from infersight.core.records import Sample
from infersight.monitor.history import SPARKS, History, sparkline
from infersight.monitor.state import MonitorState
from infersight.telemetry.process_tree import ProcessTree

values = st.lists(st.one_of(st.none(), st.floats(0, 1e6)), max_size=400)


@given(values, st.integers(1, 200))
def test_a_sparkline_fits_and_draws_its_peak(vs: list[float | None], width: int) -> None:
    line = sparkline(vs, width)
    assert len(line) == min(len(vs), width)
    assert set(line) <= set(SPARKS) | {" "}
    finite = [v for v in vs if v is not None]
    if len(vs) <= width and finite and max(finite) > 0:
        assert SPARKS[-1] in line  # the largest point reaches the top
    if not finite:
        assert line.strip() == ""


def test_sparkline_scale_and_gaps() -> None:
    assert sparkline([0.0, 0.5, 1.0, None], 10, top=1.0) == "▁▅█ "
    assert sparkline([1.0] * 8 + [0.0] * 8, 4) == "██▁▁"  # squeezed: bucket means
    assert sparkline([0.0, 0.0], 5) == "▁▁"


def test_history_keeps_its_span() -> None:
    h = History(span=10.0)
    for t in range(30):
        h.add(float(t), "x", float(t))
    assert h.values("x") == [float(t) for t in range(19, 30)] and h.seconds("x") == 10.0
    h.add(30.0, "gap", None)
    assert not h.has("gap") and h.has("x")


def _round(t: float, **values: float) -> list[Sample]:
    names = {
        "R": "engine.requests_running",
        "Q": "engine.requests_waiting",
        "S": "engine.slots",
        "host": "host.cpu_percent",
        "gpu": "gpu.utilization",
    }
    out = []
    for k, v in values.items():
        labels = (
            {"engine": "vllm"} if k in "RQS" else {"cpu": "all"} if k == "host" else {"gpu": "0"}
        )
        out.append(Sample(t, names[k], v, labels))
    return out


def test_state_records_rqs_and_busy_from_the_gpu_else_the_host() -> None:
    st_ = MonitorState()
    st_.update(_round(1.0, R=2, Q=0, S=8, host=40.0))
    st_.update(_round(2.0, R=8, Q=3, S=8, host=90.0))
    h = st_.history
    assert (
        h.values("running") == [2, 8]
        and h.values("waiting") == [0, 3]
        and h.values("slots") == [8, 8]
    )
    assert h.values("busy") == [0.4, 0.9] and st_.busy_label == "host CPU"
    st_.update(_round(3.0, R=8, Q=3, S=8, host=90.0, gpu=0.5))
    assert h.values("busy")[-1] == 0.5 and st_.busy_label == "GPU busy"


def test_the_process_tree_lists_a_server_and_its_child() -> None:
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import subprocess, sys, time; "
                "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); "
                "print(c.pid, flush=True); time.sleep(30)"
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    child = 0
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        tree = ProcessTree(parent.pid)
        first = tree.rows()
        assert [(r.pid, r.depth) for r in first] == [(parent.pid, 0), (child, 1)]
        assert all(r.cpu_percent is None and (r.rss_bytes or 0) > 0 for r in first)
        second = tree.rows()  # the second look has a CPU share, however soon it comes
        assert all(r.cpu_percent is not None and r.threads for r in second)
        assert "python" in second[0].command and "time.sleep(30)" in second[1].command
    finally:
        if child:
            os.kill(child, signal.SIGKILL)
        parent.kill()
        parent.wait()
    assert ProcessTree(parent.pid).rows() == []  # gone: no rows, no error
