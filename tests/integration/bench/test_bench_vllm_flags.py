"""Command lines copied from vLLM's benchmark docs (docs/benchmarking/cli.md,
``vllm bench serve``) run as they are, with ``infersight bench`` in place of
``vllm bench serve``, against the fake server: each flag means what it means there."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from infersight.core.records import load_run_result
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI

pytestmark = pytest.mark.timeout(120)

CLI = [sys.executable, "-c", "from infersight.cli import main; main()", "bench"]
MODEL = "NousResearch/Hermes-3-Llama-3.1-8B"

#: "Online Benchmark" in vLLM's docs, as printed there (the dataset path filled in).
DOCS_SHAREGPT = f"""
  --backend vllm \\
  --model {MODEL} \\
  --endpoint /v1/completions \\
  --dataset-name sharegpt \\
  --dataset-path DATA/ShareGPT_V3_unfiltered_cleaned_split.json \\
  --num-prompts 10
"""
#: vLLM's "Maximum Throughput" pattern (--request-rate=inf --max-concurrency=<limit>)
#: on the random dataset of its Responses example, through the chat API.
DOCS_RANDOM = """
    --backend openai-chat \\
    --endpoint /v1/chat/completions \\
    --dataset-name random \\
    --random-input-len 24 \\
    --random-output-len 4 \\
    --num-prompts 12 \\
    --request-rate=inf --max-concurrency=3 --seed 42 \\
    --save-result --result-dir RESULTS --result-filename bench.json \\
    --percentile-metrics ttft,tpot,e2el --metric-percentiles 50,99
"""


def _run(line: str, *extra: str) -> subprocess.CompletedProcess[str]:
    args = shlex.split(line.replace("\\\n", " "))
    return subprocess.run(
        [*CLI, *args, *extra, "--no-progress"],
        capture_output=True,
        text=True,
        timeout=90,
        env={**os.environ, "INFERSIGHT_DEBUG": ""},
    )


def _sharegpt(folder: Path, n: int = 16) -> Path:
    rows = [
        {
            "id": str(i),
            "conversations": [
                {"from": "human", "value": f"Tell me about topic {i}, briefly please."},
                {"from": "gpt", "value": "Here is a short answer about that topic."},
            ],
        }
        for i in range(n)
    ]
    path = folder / "ShareGPT_V3_unfiltered_cleaned_split.json"
    path.write_text(json.dumps(rows))
    return path


def test_the_docs_sharegpt_line_runs_against_the_completions_api(tmp_path: Path) -> None:
    _sharegpt(tmp_path)
    with FakeOpenAI.subprocess(FakeConfig(model=MODEL, tokens=4, ttft=0.01)) as srv:
        port = srv.base_url.rsplit(":", 1)[1].split("/")[0]
        line = DOCS_SHAREGPT.replace("DATA", str(tmp_path))
        # vLLM's default server is 127.0.0.1:8000; here it is the fake's port
        p = _run(line, "--port", port, "--save-result", "--result-dir", str(tmp_path / "out"))
        by_path = srv.stats()["by_path"]
    assert p.returncode == 0, p.stderr
    # the start-up check and the ten prompts, all on the completions API
    assert by_path.get("/v1/completions") == 11 and "/v1/chat/completions" not in by_path
    result = load_run_result(tmp_path / "out" / "result.json")
    cfg = result.config
    assert cfg["endpoint"] == "completions" and cfg["requests"] == 10 and cfg["model"] == MODEL
    assert cfg["dataset"].endswith("ShareGPT_V3_unfiltered_cleaned_split.json")
    # no --request-rate: vLLM's default, every request at once
    assert [lv["arrival"] for lv in cfg["levels"]] == ["all-at-once"]
    assert sum(r.ok for r in result.records) == 10
    assert (tmp_path / "out" / "records.csv").exists()


def test_the_docs_throughput_pattern_with_random_prompts(tmp_path: Path) -> None:
    with FakeOpenAI.subprocess(FakeConfig(model=MODEL, tokens=4, ttft=0.02, itl=0.005)) as srv:
        line = DOCS_RANDOM.replace("RESULTS", str(tmp_path / "res"))
        p = _run(line, "--base-url", srv.base_url)
        stats = srv.stats()
    assert p.returncode == 0, p.stderr
    assert stats["by_path"].get("/v1/chat/completions") == 1 + 12  # the check, then the run
    assert stats["max_in_flight"] <= 3  # --max-concurrency caps the all-at-once sends
    result = load_run_result(tmp_path / "res" / "bench.json")
    assert (tmp_path / "res" / "bench.csv").exists()
    cfg = result.config
    assert cfg["input_tokens"] == "fixed:24" and cfg["output_tokens"] == "fixed:4"
    assert cfg["seed"] == 42 and cfg["max_concurrency"] == 3
    assert cfg["percentile_metrics"] == ["ttft", "tpot", "e2e"]
    assert cfg["metric_percentiles"] == [50.0, 99.0]
    said = " ".join(p.stdout.split())
    for metric in ("TTFT", "TPOT", "E2EL"):
        assert f"{metric} mean " in said
    assert ", p50 " in said and ", p99 " in said and "ITL mean" not in said


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--backend", "openai-audio"], "--backend openai-audio"),
        (["--endpoint", "/v1/embeddings"], "--endpoint /v1/embeddings"),
        (["--dataset-name", "sonnet"], "--dataset-name sonnet"),
        (["--dataset-name", "sharegpt"], "--dataset-path"),
        (["--result-dir", "x"], "--save-result"),
        (["--request-rate", "2", "--rate", "1"], "--request-rate"),
        (["--percentile-metrics", "goodput"], "--percentile-metrics"),
        (["--metric-percentiles", "100"], "--metric-percentiles"),
        (["--base-url", "http://127.0.0.1:9", "--host", "h"], "--host"),
    ],
)
def test_flags_that_cannot_be_honoured_say_so_in_one_line(
    args: list[str],
    needle: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from infersight.cli import main

    monkeypatch.setattr(sys, "argv", ["infersight", "bench", *args])
    with pytest.raises(SystemExit) as exc:
        main()
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code != 0 and len(err) == 1 and err[0].startswith("error:"), err
    assert needle in err[0]
