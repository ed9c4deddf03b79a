"""`infersight gateway` as users run it: a real process, flags, Ctrl-C."""

from __future__ import annotations

import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import orjson
import pytest

from infersight_testkit.cli_process import CLI, interrupt, start_cli
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI


def test_cli_serves_and_stops_on_ctrl_c() -> None:
    with FakeOpenAI.subprocess(FakeConfig(tokens=2)) as fake:
        proc, _, url = start_cli(
            "--upstream",
            f"a={fake.base_url},models=fake,concurrency=4",
            "--port",
            "0",
            "--queue",
            "8",
        )
        try:
            req = urllib.request.Request(
                url + "/v1/chat/completions",
                data=orjson.dumps(
                    {"model": "fake", "messages": [{"role": "user", "content": "hi"}]}
                ),
                headers={"Content-Type": "application/json", "X-Request-Id": "cli-1"},
            )
            with urllib.request.urlopen(req, timeout=10) as r:
                assert r.status == 200 and r.headers["X-Request-Id"] == "cli-1"
            log_line = proc.stdout.readline()  # type: ignore[union-attr]
            entry = orjson.loads(log_line)  # stdout: JSON access lines only, no banner
            assert entry["request_id"] == "cli-1" and entry["status"] == 200
            with urllib.request.urlopen(url + "/health", timeout=10) as r:
                assert orjson.loads(r.read())["status"] == "ok"
        finally:
            rc = interrupt(proc, 15)
        assert rc == 0


def test_cli_bad_flags_are_one_line_errors() -> None:
    for args in (
        ["--upstream", "nourl"],
        ["--upstream", "a=ftp://x"],
        ["--config", "/nonexistent.toml"],
    ):
        # exits by itself (the 60 s timeout raises if it does not)
        r = subprocess.run([*CLI, "gateway", *args], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2, r.stderr
        assert r.stderr.startswith("error: ") and "Traceback" not in r.stderr


def test_cli_taken_port_is_one_line_and_exit_2() -> None:
    import socket

    with FakeOpenAI.subprocess(FakeConfig(tokens=2)) as fake, socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for args in (["--upstream", f"a={fake.base_url}"], []):  # an upstream; the engine
            r = subprocess.run(
                [*CLI, "gateway", "--port", str(port), *args],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert r.returncode == 2, r.stderr
            assert r.stderr.splitlines() == [
                f"error: port {port} on 127.0.0.1 is already in use; choose another --port, "
                "or --port 0 for a free one"
            ]  # no OSError, no "Unclosed client session" warnings
            assert r.stdout == ""


def test_cli_client_key_from_env_or_file(tmp_path: Path) -> None:
    """--api-key-env / --api-key-file: the key clients must send, as `serve` takes it."""
    import openai

    key_file = tmp_path / "key"
    key_file.write_text("sk-from-file-1\n")
    with FakeOpenAI.subprocess(FakeConfig(tokens=2)) as fake:
        for flag, value, key in (
            ("--api-key-env", "C14C_GW_KEY", "sk-from-env-1"),
            ("--api-key-file", str(key_file), "sk-from-file-1"),
        ):
            os.environ["C14C_GW_KEY"] = "sk-from-env-1"
            try:
                proc, _, url = start_cli(
                    "--upstream",
                    f"a={fake.base_url},models=fake",
                    "--port",
                    "0",
                    "--no-access-log",
                    flag,
                    value,
                )
            finally:
                del os.environ["C14C_GW_KEY"]
            try:
                ok = openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0)
                r = ok.chat.completions.create(
                    model="fake", messages=[{"role": "user", "content": "hi"}]
                )
                assert r.choices[0].message.content
                with pytest.raises(openai.AuthenticationError):
                    openai.OpenAI(
                        base_url=f"{url}/v1", api_key="sk-wrong", max_retries=0
                    ).chat.completions.create(
                        model="fake", messages=[{"role": "user", "content": "hi"}]
                    )
            finally:
                assert interrupt(proc, 30) == 0
                err = proc.stderr.read()  # type: ignore[union-attr]
                assert key not in err and key not in (proc.stdout.read() or "")  # type: ignore[union-attr]


def test_cli_hash_key() -> None:
    from infersight.gateway import hash_key

    r = subprocess.run(
        [*CLI, "gateway", "--hash-key"],
        input="sk-abc\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0 and r.stdout.strip() == hash_key("sk-abc")


def test_cli_example_config_round_trips(tmp_path: Path) -> None:
    from infersight.gateway import load_config

    r = subprocess.run(
        [*CLI, "gateway", "--example-config"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0
    f = tmp_path / "gw.toml"
    f.write_text(r.stdout)
    assert len(load_config(f).upstreams) == 3


@pytest.mark.engine
@pytest.mark.timeout(240)
def test_cli_without_upstream_fronts_the_embedded_engine_and_stops_it() -> None:
    import openai
    import psutil

    proc, first, url = start_cli(
        "--port", "0", "--max-concurrency", "2", "--no-access-log", wait=180
    )
    try:
        assert first.startswith("infersight gateway: listening on ")
        up = proc.stderr.readline()  # type: ignore[union-attr]  # the banner's first fact
        assert up.split()[:2] == ["upstream", up.split()[1]] and "engine=http://127.0.0.1:" in up
        engines = psutil.Process(proc.pid).children(recursive=True)
        assert engines  # the engine runs as our child, on a private loopback port
        engine_url = up.split("engine=", 1)[1].split()[0]
        with pytest.raises(urllib.error.HTTPError) as refused:  # ...behind a key only we hold
            urllib.request.urlopen(engine_url + "/v1/models", timeout=10)
        assert refused.value.code == 401
        client = openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)
        out = client.chat.completions.create(
            model="SmolLM2-135M-Instruct",
            messages=[{"role": "user", "content": "Say hi"}],
            max_tokens=4,
        )
        assert out.usage is not None and out.usage.completion_tokens >= 1
        with urllib.request.urlopen(url + "/stats", timeout=10) as r:
            (up,) = orjson.loads(r.read())["upstreams"]
        # --max-concurrency is the engine's slot count and the gateway's limit in front of it
        assert up["name"] == "engine" and up["limit"] == 2 and up["queue_size"] == 16, up
    finally:
        rc = interrupt(proc, 60)
    assert rc == 0
    err = proc.early_stderr + (proc.stderr.read() if proc.stderr else "")  # type: ignore[attr-defined]
    assert "no upstream given: starting the embedded engine..." in err
    assert "Traceback" not in err
    assert not [p for p in engines if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
