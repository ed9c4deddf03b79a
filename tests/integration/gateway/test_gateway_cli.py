"""`infersight gateway` as users run it: a real process, flags, Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import orjson

from infersight.testing.fake_openai import FakeConfig, FakeOpenAI

CLI = [sys.executable, "-c", "from infersight.cli import main; main()"]


def test_cli_serves_and_stops_on_ctrl_c() -> None:
    with FakeOpenAI.subprocess(FakeConfig(tokens=2)) as fake:
        proc = subprocess.Popen(
            [*CLI, "gateway", "--upstream", f"a={fake.base_url},models=fake,concurrency=4",
             "--port", "0", "--queue", "8"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        try:
            lines: list[str] = []
            t = threading.Thread(target=lambda: lines.append(proc.stdout.readline()),  # type: ignore[union-attr]
                                 daemon=True)
            t.start()
            t.join(30)
            assert lines and "listening on http://127.0.0.1:" in lines[0], lines
            url = lines[0].split("listening on ")[1].split()[0]
            req = urllib.request.Request(
                url + "/v1/chat/completions",
                data=orjson.dumps({"model": "fake", "messages": [{"role": "user",
                                                                   "content": "hi"}]}),
                headers={"Content-Type": "application/json", "X-Request-Id": "cli-1"},
            )
            with urllib.request.urlopen(req, timeout=10) as r:
                assert r.status == 200 and r.headers["X-Request-Id"] == "cli-1"
            log_line = proc.stdout.readline()  # type: ignore[union-attr]
            entry = orjson.loads(log_line)
            assert entry["request_id"] == "cli-1" and entry["status"] == 200
            with urllib.request.urlopen(url + "/health", timeout=10) as r:
                assert orjson.loads(r.read())["status"] == "ok"
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                rc = proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = -9
        assert rc == 0


def test_cli_bad_flags_are_one_line_errors() -> None:
    for args in (["--upstream", "nourl"], ["--upstream", "a=ftp://x"],
                 ["--config", "/nonexistent.toml"]):
        t0 = time.monotonic()
        r = subprocess.run([*CLI, "gateway", *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, r.stderr
        assert r.stderr.startswith("error: ") and "Traceback" not in r.stderr
        assert time.monotonic() - t0 < 60


def test_cli_hash_key() -> None:
    from infersight.gateway import hash_key

    r = subprocess.run([*CLI, "gateway", "--hash-key"], input="sk-abc\n", capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == hash_key("sk-abc")


def test_cli_example_config_round_trips(tmp_path: Path) -> None:
    from infersight.gateway import load_config

    r = subprocess.run([*CLI, "gateway", "--example-config"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0
    f = tmp_path / "gw.toml"
    f.write_text(r.stdout)
    assert len(load_config(f).upstreams) == 3
