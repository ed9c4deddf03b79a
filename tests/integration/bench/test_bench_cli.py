"""`infersight bench` as a user runs it: Ctrl-C, bad input, outputs on disk."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from infersight.bench import BenchConfig, run
from infersight.core.records import RunResult, load_run_result
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI
from support.ports import closed_port
from support.waiting import until_blocking

pytestmark = pytest.mark.timeout(120)


CLI = [sys.executable, "-c", "from infersight.cli import main; main()", "bench"]


def _bench(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args, "--no-progress", "--no-diagnose"],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "INFERSIGHT_DEBUG": ""},
    )


def _one_clear_line(p: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert p.returncode != 0
    assert "Traceback" not in p.stderr
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), p.stderr
    for n in needles:
        assert n.lower() in lines[0].lower(), lines[0]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_sigint_leaves_a_valid_partial_result(tmp_path: Path, sig: signal.Signals) -> None:
    slow = FakeConfig(ttft=0.05, itl=0.2, tokens=100)  # 20 s per request
    with FakeOpenAI.subprocess(slow) as srv:
        out = tmp_path / "run"
        proc = subprocess.Popen(
            [
                *CLI,
                "--url",
                srv.base_url,
                "--concurrency",
                "3",
                "--requests",
                "30",
                "--max-tokens",
                "100",
                "--input-tokens",
                "8",
                "--grace",
                "0.5",
                "--out",
                str(out),
                "--no-progress",
                "--no-diagnose",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            # All three users have a request in flight (20 s each): the signal
            # cancels all three.
            until_blocking(
                lambda: srv.stats().get("in_flight", 0) >= 3, "three requests in flight", 60, 0.2
            )
            proc.send_signal(sig)
            stdout, stderr = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    doc = json.loads((out / "result.json").read_text())
    jsonschema.validate(doc, json.loads((out / "schema.json").read_text()))
    result = load_run_result(out / "result.json")
    assert result.partial is True
    cancelled = [r for r in result.records if r.cancelled]
    assert len(cancelled) == 3
    assert all(r.error == "Cancelled" and not r.ok for r in cancelled)
    assert result.aggregates["c=3"]["requests"]["cancelled"] == 3
    # the note names the signal: a scheduler's SIGTERM is not a Ctrl-C
    said = "terminated (SIGTERM)" if sig == signal.SIGTERM else "interrupted (Ctrl-C)"
    assert any(n.startswith(f"{said} during level c=3") for n in result.notes), result.notes
    assert not any(("Ctrl-C" in n) for n in result.notes) or sig == signal.SIGINT
    # A flagged run's CSV starts with a '#' headline (a loaded machine can flag it).
    lines = (out / "records.csv").read_text().splitlines()
    rows = list(csv.DictReader(ln for ln in lines if not ln.startswith("#")))
    assert sum(r["cancelled"] == "True" for r in rows) == 3
    assert "PARTIAL" in stdout


def test_unreachable_url() -> None:
    with closed_port() as port:
        p = _bench("--url", f"http://127.0.0.1:{port}", "--requests", "1")
    # the address and the system's reason, not aiohttp's "ssl:default [Connect call ...]"
    _one_clear_line(p, f"error: cannot connect to 127.0.0.1:{port}: connection refused")
    assert "ssl:" not in p.stderr and "[" not in p.stderr and "Connect call" not in p.stderr


def test_bad_key_and_unknown_model(tmp_path: Path) -> None:
    with FakeOpenAI.subprocess(FakeConfig(api_key="right-key-123")) as srv:
        p = _bench("--url", srv.base_url, "--requests", "1")
        _one_clear_line(p, "401")
        key = tmp_path / "key"
        key.write_text("right-key-123\n")
        p = _bench("--url", srv.base_url, "--api-key-file", str(key), "--model", "nope")
        _one_clear_line(p, "nope", "fake")
        assert "right-key-123" not in p.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--concurrency", "1,x"], "--concurrency"),
        (["--slo", "ttft_p99>5ms"], "--slo"),
        (["--endpoint", "foo"], "--endpoint"),
        (["--input-tokens", "zipf:1:2"], "--input-tokens"),
        (["--find-max"], "--slo"),
        (["--rate", "1", "--concurrency", "2"], "one of"),
        (["--dataset", "/nonexistent.jsonl"], "cannot read"),
    ],
)
def test_bad_flags(
    args: list[str],
    needle: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # In-process through the real entry point (a subprocess per case is slow here).
    from infersight.cli import main

    monkeypatch.setattr(sys, "argv", ["infersight", "bench", "--url", "http://127.0.0.1:9", *args])
    with pytest.raises(SystemExit) as exc:
        main()
    err = capsys.readouterr().err
    p = subprocess.CompletedProcess(args, int(exc.value.code or 0), "", err)
    _one_clear_line(p, needle)


def test_a_reset_after_the_server_read_the_request_is_an_error_not_a_resend() -> None:
    # The second level request reaches the server, which then drops the connection
    # without an answer (after reading it). The server may have processed it, so
    # neither bench nor the client sends it again (docs/design.md section 3); bench
    # measures without retries, so it is recorded as a ResetError. ("ok" answers the
    # start-up check.)
    with FakeOpenAI.subprocess(FakeConfig(tokens=3, script=["ok", "ok", "reset"])) as srv:
        result = run(
            BenchConfig(
                url=srv.base_url,
                concurrency=[1],
                requests=3,
                input_tokens="4",
                max_tokens=3,
                diagnose=False,
                progress=False,
            )
        )
        sent = srv.stats()["by_path"]["/v1/chat/completions"]
    recs = sorted(result.records, key=lambda r: r.scheduled)
    assert [r.ok for r in recs] == [True, False, True]
    assert recs[1].error == "ResetError" and recs[1].headers is None
    assert [(r.attempts, r.resends) for r in recs] == [(1, 0), (1, 0), (1, 0)]
    assert sent == 4  # the check and three requests: nothing went out twice


def test_schema_file_matches_the_model() -> None:
    assert RunResult.model_json_schema()["title"] == "RunResult"


def test_the_command_chains_bench_diagnose_and_outputs(tmp_path: Path) -> None:
    # bench.run measures only; the command diagnoses the run before any output, so
    # the console and result.json show the same typed verdicts.
    with FakeOpenAI.subprocess(FakeConfig(tokens=4)) as srv:
        out = tmp_path / "run"
        p = subprocess.run(
            [
                *CLI,
                "--url",
                srv.base_url,
                "--concurrency",
                "1",
                "--requests",
                "6",
                "--max-tokens",
                "4",
                "--input-tokens",
                "8",
                "--out",
                str(out),
                "--no-progress",
            ],
            capture_output=True,
            text=True,
            timeout=90,
        )
    assert p.returncode == 0, p.stderr
    result = load_run_result(out / "result.json")
    assert result.diagnosis and not [n for n in result.notes if "diagnosis failed" in n]
    said = " ".join(p.stdout.split())
    for v in result.diagnosis:
        assert v.level == "c=1" and v.evidence and all(e.key for e in v.evidence)
        # each verdict line names its level and window
        assert f"{v.title} (level c=1, " in said and v.summary[:50] in said
    assert said.index("best operating point:") < said.index("req/s")  # the answer first
    doc = json.loads((out / "result.json").read_text())
    jsonschema.validate(doc, json.loads((out / "schema.json").read_text()))


def test_find_max_answers_in_a_sentence_and_peer_flag_names_work(tmp_path: Path) -> None:
    # --num-prompts and --goodput are vllm bench serve's names (goodput limits in ms)
    with FakeOpenAI.subprocess(FakeConfig(tokens=4)) as srv:
        out = tmp_path / "run"
        p = subprocess.run(
            [
                *CLI,
                "--url",
                srv.base_url,
                "--find-max",
                "--goodput",
                "ttft:2000 tpot:500",
                "--find-max-steps",
                "1",
                "--num-prompts",
                "6",
                "--max-tokens",
                "4",
                "--input-tokens",
                "8",
                "--out",
                str(out),
                "--no-progress",
                "--no-diagnose",
            ],
            capture_output=True,
            text=True,
            timeout=90,
        )
    assert p.returncode == 0, p.stderr
    result = load_run_result(out / "result.json")
    assert result.config["slo"] == {"ttft_max": 2.0, "tpot_max": 0.5}
    assert result.config["requests"] == 6
    said = " ".join(p.stdout.split())
    assert (
        "find-max: the highest sustainable rate meeting TTFT max < 2s and TPOT max < 500ms is "
        in said
    )
    assert "{'" not in p.stdout and "ttft_max" not in p.stdout  # no Python dict


def test_format_llm_d_writes_one_valid_report_per_level(tmp_path: Path) -> None:
    """A real run written as llm-d-benchmark's benchmark report 0.2.1: the format's own
    package loads each level's file, and it carries that level's own figures."""
    from llmd_benchmark_report import import_benchmark_report

    with FakeOpenAI.subprocess(FakeConfig(ttft=0.02, itl=0.002, tokens=8)) as srv:
        out = tmp_path / "run"
        p = _bench(
            "--url",
            srv.base_url,
            "--concurrency",
            "1,4",
            "--requests",
            "24",
            "--max-tokens",
            "8",
            "--input-tokens",
            "16",
            "--format",
            "llm-d",
            "--out",
            str(out),
        )
        assert p.returncode == 0, p.stderr
        missing_out = _bench("--url", srv.base_url, "--requests", "1", "--format", "llm-d")
        old = tmp_path / "old"
        p01 = _bench(
            *("--url", srv.base_url, "--concurrency", "2", "--requests", "8"),
            *("--format", "llm-d:0.1", "--out", str(old)),
        )
        assert p01.returncode == 0, p01.stderr
    _one_clear_line(missing_out, "--out")
    (v01,) = (old / "llm-d").glob("*.json")
    assert import_benchmark_report(str(v01)).dump()["version"] == "0.1"
    # Read back, the reports give the run's own verdict and fix.
    diagnosed = [
        subprocess.run(
            [*CLI[:-1], "diagnose", *map(str, files), "--json"], capture_output=True, text=True
        )
        for files in ([out / "result.json"], sorted((out / "llm-d").glob("*.json")))
    ]
    assert all(d.returncode == 0 for d in diagnosed), [d.stderr for d in diagnosed]
    run_fix, reports_fix = (json.loads(d.stdout)["recommendation"] for d in diagnosed)
    assert {k: reports_fix[k] for k in ("verdict", "knob", "target")} == {
        k: run_fix[k] for k in ("verdict", "knob", "target")
    }
    result = load_run_result(out / "result.json")
    files = sorted((out / "llm-d").glob("*.json"))
    assert [f.name for f in files] == ["benchmark_report_c_1.json", "benchmark_report_c_4.json"]
    for f in files:
        rep = import_benchmark_report(str(f)).dump()
        assert rep["version"] == "0.2.1"
        level = rep["results"]["observability"]["infersight"]["level"]
        agg = result.aggregates[level]
        load = rep["scenario"]["load"]
        assert load["standardized"]["concurrency"] == agg["target"]["concurrency"]
        perf = rep["results"]["request_performance"]["aggregate"]
        assert perf["requests"]["total"] == 24
        assert perf["latency"]["time_to_first_token"]["p50"] == pytest.approx(agg["ttft"]["p50"])
        assert perf["throughput"]["output_token_rate"]["mean"] == pytest.approx(
            agg["output_token_throughput"]
        )
