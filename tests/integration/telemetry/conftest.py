"""A real Prometheus (Debian's), started by the test on a free port with the shipped
alert rules, scraping the given targets every second."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prom_helpers import DATA, Prometheus

from infersight.core.listen import free_port


@pytest.fixture
def prometheus_factory(tmp_path: Path) -> Iterator[Any]:
    """``start({"job": "http://host:port/path", ...}) -> Prometheus``."""
    procs: list[subprocess.Popen[bytes]] = []
    exe = shutil.which("prometheus") or "/usr/bin/prometheus"

    def start(targets: dict[str, str]) -> Prometheus:
        port = free_port()
        jobs = ""
        for job, url in targets.items():
            hostport, path = url.split("//", 1)[1].split("/", 1)
            jobs += (
                f"  - job_name: {job}\n    metrics_path: /{path}\n"
                f"    static_configs:\n      - targets: ['{hostport}']\n"
            )
        cfg = tmp_path / "prometheus.yml"
        cfg.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            f"rule_files: ['{DATA / 'alerts.yml'}']\n"
            f"scrape_configs:\n{jobs}"
        )
        log = (tmp_path / "prometheus.log").open("wb")
        procs.append(
            subprocess.Popen(
                [
                    exe,
                    f"--config.file={cfg}",
                    f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{port}",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        return Prometheus(f"http://127.0.0.1:{port}")

    yield start
    for p in procs:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
