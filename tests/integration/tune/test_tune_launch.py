"""``tune --launch``: a server restarted per trial from a template, over loopback, and
every way a launch goes wrong recorded as a typed error (docs/design.md section 8)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from infersight.bench import BenchConfig
from infersight.core.errors import ConfigError, LaunchError, OutOfMemory
from infersight.core.tune_result import load_tune_result
from infersight.entrypoints.tune import run_tune
from infersight.tune import TuneConfig
from infersight.tune.launch import launched, template_knobs
from support.waiting import until_blocking

pytestmark = pytest.mark.timeout(240)

CLI = [sys.executable, "-c", "from infersight.cli import main; main()", "tune"]
FAKE = f"{sys.executable} -m infersight_testkit.fake.openai --port {{port}} --metrics-dialect vllm"


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_a_launched_server_serves_the_trial_and_its_group_is_stopped(tmp_path: Path) -> None:
    # The shell starts the server as its child: stopping the group stops both.
    template = f"{FAKE} --slots {{max_num_seqs}} & wait"
    with launched(template, {"slots": 3}, log=tmp_path / "s.log", start_timeout=30) as ep:
        assert ep.slots == 3 and ep.started_by == "tune" and ep.pid is not None
        with urllib.request.urlopen(ep.url + "/v1/models", timeout=5) as r:
            assert json.loads(r.read())["data"][0]["id"] == "fake"
        pid = ep.pid
    until_blocking(lambda: _gone(pid), "the launched server to be gone")


@pytest.mark.parametrize(
    ("template", "error", "reason", "words"),
    [
        ("echo starting {port}; exit 3", LaunchError, "exited", "status 3"),
        (
            "echo 'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB' >&2;"
            " exit 1 # {port}",
            OutOfMemory,
            None,
            "CUDA out of memory",
        ),
        ("sleep 30 # {port}", LaunchError, "start_timeout", "within 1 s"),
    ],
    ids=["exits-at-once", "oom-at-start", "never-healthy"],
)
def test_a_bad_launch_raises_its_typed_error(
    tmp_path: Path, template: str, error: type[Exception], reason: str | None, words: str
) -> None:
    with (
        pytest.raises(error) as got,
        launched(template, {}, log=tmp_path / "s.log", start_timeout=1),
    ):
        pass
    assert words in str(got.value)
    # the never-healthy server: the 1 s start timeout ended the launch (a launch that
    # waited for the server instead would see its 30 s sleep end: "exited")
    if reason is not None:
        assert isinstance(got.value, LaunchError) and got.value.reason == reason


def test_a_launch_that_finds_its_port_taken(tmp_path: Path, taken_port: int) -> None:
    template = FAKE.replace("{port}", str(taken_port)) + " # {port}"
    with (
        pytest.raises(LaunchError) as got,
        launched(template, {}, log=tmp_path / "s.log", start_timeout=30),
    ):
        pass
    assert got.value.reason == "port_taken" and "taken" in str(got.value)


def test_templates_are_checked_before_anything_runs() -> None:
    assert template_knobs("x --max-num-seqs {max_num_seqs} --port {port} -t {threads}") == {
        "slots",
        "threads",
    }
    with pytest.raises(ConfigError, match=r"needs \{port\}"):
        template_knobs("vllm serve M --max-num-seqs {max_num_seqs}")
    with pytest.raises(ConfigError, match=r"unknown placeholder \{gpus\}"):
        template_knobs("x {gpus} {port}")
    with pytest.raises(ConfigError, match="literal brace"):
        template_knobs("x {port")


def test_tune_over_launches_records_each_failure_as_a_trial(tmp_path: Path) -> None:
    # Slots above 4 run out of memory at start, 3 never becomes healthy; 1, 2 and 4 serve.
    template = (
        "if [ {slots} -gt 4 ]; then echo 'CUDA out of memory. Tried to allocate 8 GiB' >&2; "
        "exit 1; fi; if [ {slots} -eq 3 ]; then exec sleep 30; fi; "
        f"exec {FAKE} --slots {{slots}} --ttft 0.02 --itl 0.005 --tokens 8 --compute-knee 2"
    )
    cfg = TuneConfig.build(
        launch=template,
        slots=2,
        search="grid",
        values=[1, 2, 3, 4, 8],
        start_timeout=2.0,
        out=str(tmp_path / "t"),
        progress=False,
    )
    bench = BenchConfig.build(max_tokens=8, input_tokens="fixed:8", duration=1.0, progress=False)
    result = run_tune(cfg, bench)
    by = {t.setting["slots"]: t for t in result.trials if t.role == "grid"}
    assert by[8].status == "failed" and by[8].error == "OutOfMemory"
    assert by[3].status == "failed" and by[3].error == "LaunchError"
    assert "not healthy" in (by[3].error_message or "")
    assert by[1].status == "ok" and by[4].status == "ok"
    if result.stopped == "done":  # (not when another process disturbed the A/A pair)
        assert result.chosen is not None and result.chosen["slots"] in (2, 4)
    saved = load_tune_result(tmp_path / "t" / "tune.json")
    assert saved.trials == result.trials
    for t in saved.trials:
        if t.status == "ok":
            assert t.result is not None and (tmp_path / "t" / t.result).is_file()
    assert (tmp_path / "t" / "trials").is_dir() and (tmp_path / "t" / "tune.html").is_file()


def test_the_cli_says_one_line_for_a_bad_template_and_a_failed_baseline(tmp_path: Path) -> None:
    for args, line in (
        (
            ["--launch", "x {slots}", "--slots", "2"],
            "error: --launch needs {port}: each trial gets a free port of its own",
        ),
        (
            ["--launch", "x {port} {slots}"],
            "error: --launch has a slots placeholder: give its current value with --slots N "
            "(the current --max-num-seqs or --parallel)",
        ),
        (
            ["--launch", "x {port}"],
            "error: the --launch template has no slot placeholder to size each trial's load "
            "by: give --concurrency or --rate",
        ),
    ):
        bad = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60)
        assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [line], bad.stderr
    dead = subprocess.run(
        [
            *CLI,
            "--launch",
            "exit 7 # {port} {slots}",
            "--slots",
            "2",
            "--out",
            str(tmp_path / "d"),
            "--no-progress",
            "--requests",
            "4",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert dead.returncode == 1, dead.stderr
    assert "Traceback" not in dead.stderr + dead.stdout
    assert "did not run" in dead.stdout and "status 7" in dead.stdout
    assert load_tune_result(tmp_path / "d" / "tune.json").stopped == "baseline failed"


def test_ctrl_c_keeps_the_trials_done(tmp_path: Path) -> None:
    out = tmp_path / "c"
    proc = subprocess.Popen(
        [
            *CLI,
            "--launch",
            f"{FAKE} --slots {{slots}} --ttft 0.02 --tokens 8",
            "--slots",
            "2",
            "--duration",
            "1s",
            "--max-tokens",
            "8",
            "--out",
            str(out),
            "--no-progress",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    until_blocking((out / "tune.json").exists, "the first tune.json", timeout=90)
    assert load_tune_result(out / "tune.json").stopped == "running"
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr + stdout
    saved = load_tune_result(out / "tune.json")
    assert saved.stopped == "interrupted" and saved.partial and saved.trials
    assert saved.trials[0].status == "ok" and "stopped early: interrupted" in saved.summary
