"""One GuideLLM run shared by the importer tests that read it: GuideLLM's own results
file of the 4-slot fake server and infersight's bench of the same server, measured once
a session (each GuideLLM run costs about a minute of the heavy tier)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from infersight.bench import BenchConfig
from infersight.core.records import RunResult
from infersight.entrypoints.bench import bench_and_diagnose
from infersight_testkit.fake.openai import FakeOpenAI
from infersight_testkit.tool_runs import run_guidellm
from support.tool_server import LEVELS, REQUESTS, SERVER


@pytest.fixture(scope="session")
def guidellm_measured(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, RunResult]]:
    """GuideLLM's results file, then infersight's bench of the same server at the same
    concurrencies (tests copy the file before changing anything beside it)."""
    tmp = tmp_path_factory.mktemp("guidellm")
    with FakeOpenAI.subprocess(SERVER) as srv:
        out = run_guidellm(
            srv.base_url, tmp / "benchmarks.json", streams=LEVELS, requests=REQUESTS, tokens=16
        )
        ours = bench_and_diagnose(
            BenchConfig(
                url=srv.base_url,
                concurrency=LEVELS,
                requests=REQUESTS,
                max_tokens=16,
                input_tokens="fixed:16",
                progress=False,
                diagnose=True,
            )
        )
    yield out, ours
