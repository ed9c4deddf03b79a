"""`infersight plan` and `infersight diagnose` on files (CLI level)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from diag_fixtures import LLAMA3_8B, make_run
from typer.testing import CliRunner

from infersight.cli._app import app
from infersight.core.errors import ConfigError
from infersight.core.records import save_run_result

runner = CliRunner()


@pytest.fixture
def llama_config(tmp_path: Path) -> Path:
    p = tmp_path / "config.json"
    p.write_text(json.dumps(LLAMA3_8B))
    return p


def test_plan_json_llama_h100(llama_config: Path) -> None:
    res = runner.invoke(
        app,
        [
            "plan",
            "--model",
            str(llama_config),
            "--gpu",
            "h100",
            "--ctx",
            "8192",
            "--concurrency",
            "32",
            "--tokens",
            "256",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    plan = json.loads(res.stdout)
    assert plan["kv_bytes_per_token"] == 131072
    assert plan["kv_bytes_per_sequence"] == 8192 * 131072
    assert plan["fits"] and 45 <= plan["max_sequences"] <= 60
    assert plan["estimate"]["batch"] == 32 and plan["estimate"]["itl_floor_s"] > 0.004
    assert any(f.startswith("--max-num-seqs") for f in plan["settings"]["vllm"])


def test_plan_console_embedded_gguf() -> None:
    res = runner.invoke(
        app,
        [
            "plan",
            "--model",
            "embedded",
            "--gpu",
            "a10g",
            "--ctx",
            "4096",
            "--kv-dtype",
            "fp8",
            "--gpus",
            "2",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "max concurrent sequences" in res.stdout
    assert "--tensor-parallel-size 2" in res.stdout and "--kv-cache-dtype fp8" in res.stdout


def test_plan_unknown_gpu_lists_close_names(llama_config: Path) -> None:
    res = runner.invoke(
        app, ["plan", "--model", str(llama_config), "--gpu", "h300", "--ctx", "4096"]
    )
    assert isinstance(res.exception, ConfigError)
    msg = str(res.exception)
    assert "unknown GPU 'h300'" in msg and "h200" in msg and "\n" not in msg


def test_plan_bad_inputs(tmp_path: Path, llama_config: Path) -> None:
    for args, text in (
        (["--model", str(tmp_path / "nope.json"), "--gpu", "h100", "--ctx", "10"], "no such file"),
        (["--model", str(llama_config), "--gpu", "h100", "--ctx", "0"], "--ctx"),
        (
            ["--model", str(llama_config), "--gpu", "h100", "--ctx", "10", "--kv-dtype", "fp3"],
            "kv-dtype",
        ),
    ):
        res = runner.invoke(app, ["plan", *args])
        assert isinstance(res.exception, ConfigError), res.output
        assert text in str(res.exception)
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    res = runner.invoke(app, ["plan", "--model", str(bad), "--gpu", "h100", "--ctx", "10"])
    assert isinstance(res.exception, ConfigError) and "hidden_size" in str(res.exception)


def test_diagnose_file_json_and_console(tmp_path: Path) -> None:
    path = save_run_result(make_run(running=32, waiting=50, slots=32), tmp_path / "run.json")
    res = runner.invoke(app, ["diagnose", str(path), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    verdicts = doc["verdicts"]
    assert verdicts[0]["id"] == "slot_bound"
    # one level: no number beyond what it measured
    assert "raise --max-num-seqs above 32" in verdicts[0]["fixes"][0]
    rec = doc["recommendation"]
    assert (rec["verdict"], rec["knob"], rec["direction"]) == ("slot_bound", "slots", "up")
    assert rec["target"] is None and rec["limiter"] == "slots"
    # the fitted model and its self-check are in the JSON too
    assert doc["server_model"]["slots"]["value"] == 32
    assert doc["self_check"]["method"] == "none" and not doc["self_check"]["trusted"]
    assert [p["level"] for p in doc["capacity_curve"]["points"]] == [verdicts[0]["level"]]
    res = runner.invoke(app, ["diagnose", str(path)])
    assert res.exit_code == 0 and "slot-bound" in res.stdout and "--max-num-seqs" in res.stdout
    # the level table the advice comes from, above the fix and the verdicts
    out = res.stdout
    assert out.index("capacity curve") < out.index("fix:") < out.index("Queueing: slot-bound")


def test_diagnose_monitor_recording(tmp_path: Path) -> None:
    run = make_run(running=180, waiting=40, kv=0.97, preempt_per_s=2.0)
    rec = tmp_path / "mon.jsonl"
    lines = [orjson.dumps({"infersight_samples": 1, "interval": 1.0})]
    lines += [orjson.dumps(s.to_dict()) for s in run.samples]
    rec.write_bytes(b"\n".join(lines) + b"\n")
    res = runner.invoke(app, ["diagnose", str(rec), "--json", "--gpu", "h100"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert next(v["id"] for v in doc["verdicts"]) == "kv_bound"
    assert doc["capacity_curve"] is None  # a recording has no load levels


def test_diagnose_errors_are_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "x.json"
    bad.write_text('{"hello": 1}')
    proc = subprocess.run(
        [sys.executable, "-m", "infersight.cli", "diagnose", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if "No module named infersight.cli.__main__" in proc.stderr:
        proc = subprocess.run(
            [str(Path(sys.executable).parent / "infersight"), "diagnose", str(bad)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1
    assert "Traceback" not in proc.stderr
    res = runner.invoke(app, ["diagnose"])
    assert isinstance(res.exception, ConfigError)


@pytest.mark.parametrize(
    "args, text",
    [
        (["--since", "1h", "--start", "now-1h"], "give --since or --start, not both"),
        (["--step", "fast"], "--step 'fast': expected a duration"),
        (["--selector", "llm"], "--selector 'llm'"),
        (
            ["--since", "1h", "--window", "5", "--step", "15s"],
            "--window 5 s is shorter than --step 15 s",
        ),
    ],
)
def test_diagnose_prometheus_flags_are_checked_before_any_request(
    args: list[str], text: str
) -> None:
    # port 9 (discard) on loopback: nothing listens, and nothing is asked before the flags pass
    res = runner.invoke(app, ["diagnose", "--prometheus", "http://127.0.0.1:9", *args])
    assert isinstance(res.exception, ConfigError), res.output
    assert text in str(res.exception)


def test_diagnose_prometheus_unreachable_is_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from infersight.cli import main; main()",
            "diagnose",
            "--prometheus",
            f"http://user:hunter2@127.0.0.1:{port}",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: Prometheus at http://127.0.0.1:{port}: cannot connect")
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert "hunter2" not in proc.stderr


def test_report_prometheus_refuses_files_too(tmp_path: Path) -> None:
    res = runner.invoke(
        app, ["report", str(tmp_path / "r.json"), "--prometheus", "http://127.0.0.1:9"]
    )
    assert isinstance(res.exception, ConfigError) and "not both" in str(res.exception)
    res = runner.invoke(app, ["report"])
    assert isinstance(res.exception, ConfigError) and "--prometheus URL" in str(res.exception)


def test_plan_gives_one_number_threads_and_its_prompt_assumption(llama_config: Path) -> None:
    """Every engine's line names the same sequence count (TGI's admission limit too),
    llama.cpp's -t is a number, and an estimate without --prompt-tokens says what it
    assumed; with it, it uses it."""
    import re

    res = runner.invoke(
        app,
        [
            "plan",
            "--model",
            str(llama_config),
            "--gpu",
            "h100",
            "--ctx",
            "8192",
            "--concurrency",
            "32",
            "--json",
        ],
    )
    plan = json.loads(res.stdout)
    n = plan["recommended_slots"]
    flags = {eng: " ".join(f) for eng, f in plan["settings"].items()}
    assert (
        f"--max-num-seqs {n}" in flags["vllm"] and f"--max-running-requests {n}" in flags["sglang"]
    )
    assert (
        f"--max-concurrent-requests {n}" in flags["tgi"] and f"--parallel {n}" in flags["llama.cpp"]
    )
    assert {
        int(x) for x in re.findall(r"(?:seqs|requests|parallel) (\d+)", " ".join(flags.values()))
    } == {n}
    est = plan["estimate"]
    assert est["prompt_tokens"] == 8192 - 256 and est["prompt_tokens_assumed"] is True
    console = runner.invoke(
        app,
        [
            "plan",
            "--model",
            str(llama_config),
            "--gpu",
            "h100",
            "--ctx",
            "8192",
            "--concurrency",
            "32",
        ],
    )
    said = " ".join(console.stdout.split())
    assert "assumed: prompts of 7,936 tokens" in said and "--prompt-tokens N" in said
    given = runner.invoke(
        app,
        [
            "plan",
            "--model",
            str(llama_config),
            "--gpu",
            "h100",
            "--ctx",
            "8192",
            "--concurrency",
            "32",
            "--prompt-tokens",
            "500",
            "--json",
        ],
    )
    est = json.loads(given.stdout)["estimate"]
    assert est["prompt_tokens"] == 500 and est["prompt_tokens_assumed"] is False
    assert est["ttft_floor_s"] < plan["estimate"]["ttft_floor_s"]  # a shorter prompt, a lower floor
    too_long = runner.invoke(
        app,
        [
            "plan",
            "--model",
            str(llama_config),
            "--gpu",
            "h100",
            "--ctx",
            "1024",
            "--prompt-tokens",
            "1000",
        ],
    )
    assert isinstance(too_long.exception, ConfigError) and "--prompt-tokens" in str(
        too_long.exception
    )


def test_plan_on_a_cpu_names_the_threads() -> None:
    from infersight.engine.threads import default_threads

    res = runner.invoke(
        app, ["plan", "--model", "embedded", "--gpu", "cpu", "--ctx", "2048", "--json"]
    )
    lcpp = " ".join(json.loads(res.stdout)["settings"]["llama.cpp"])
    assert f"-t {default_threads()}" in lcpp and "<" not in lcpp
    res = runner.invoke(
        app,
        [
            "plan",
            "--model",
            "embedded",
            "--gpu",
            "cpu",
            "--ctx",
            "2048",
            "--threads",
            "1",
            "--json",
        ],
    )
    assert "-t 1" in json.loads(res.stdout)["settings"]["llama.cpp"]
