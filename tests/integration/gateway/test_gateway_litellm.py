"""A LiteLLM proxy config.yaml run by `infersight gateway --config`, used through the
official openai client: aliases, keys from the environment, rpm, retries, fallbacks."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import openai
import pytest

from infersight.gateway import load_config
from infersight_testkit.cli_process import CLI as _CLI
from infersight_testkit.cli_process import start_cli
from infersight_testkit.fake.openai import FakeConfig, FakeOpenAI

pytestmark = pytest.mark.timeout(180)

CLI = [*_CLI, "gateway"]

#: As LiteLLM's docs write it: aliases, os.environ/ keys, rpm, router settings.
LITELLM = """\
model_list:
  - model_name: my-llama              # the name clients send
    litellm_params:
      model: openai/fake              # the name the server knows
      api_base: {a}/v1
      api_key: os.environ/C14C_UPSTREAM_KEY
      rpm: 2
  - model_name: my-llama              # a second deployment of the same name
    litellm_params:
      model: hosted_vllm/fake
      api_base: {dead}
    model_info:
      id: dead-replica
  - model_name: backup
    litellm_params:
      model: openai/fake
      api_base: {c}
router_settings:
  num_retries: 0
  timeout: 30
  fallbacks:
    - my-llama: ["backup"]
general_settings:
  master_key: os.environ/C14C_MASTER_KEY
"""


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def test_the_file_becomes_upstreams_keys_and_fallbacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = tmp_path / "litellm.yaml"
    f.write_text(
        LITELLM.format(
            a="http://10.0.0.5:8000", dead="http://10.0.0.6:8000", c="http://10.0.0.7:8000"
        )
    )
    monkeypatch.setenv("C14C_MASTER_KEY", "sk-master-1")
    cfg = load_config(f)
    a, dead, c = cfg.upstreams
    assert (a.name, a.url, a.models, a.model_map) == (
        "my-llama",
        "http://10.0.0.5:8000",
        ["my-llama"],
        {"my-llama": "fake"},
    )
    assert a.api_key_env == "C14C_UPSTREAM_KEY" and a.requests_per_minute == 2
    assert dead.name == "dead-replica" and c.models == ["backup"]
    assert {u.max_attempts for u in cfg.upstreams} == {1}
    assert cfg.default_deadline_s == 30 and cfg.fallbacks == {"my-llama": ["backup"]}
    assert cfg.require_key and [k.name for k in cfg.keys] == ["master"]
    assert "sk-master-1" not in f.read_text() + repr(cfg)  # only its hash is kept


def test_official_client_through_a_litellm_config(tmp_path: Path) -> None:
    with (
        FakeOpenAI.subprocess(FakeConfig(tokens=3, api_key="up-key-123")) as a,
        FakeOpenAI.subprocess(FakeConfig(tokens=3)) as c,
    ):
        f = tmp_path / "litellm.yaml"
        f.write_text(LITELLM.format(a=a.base_url, dead=_dead_url(), c=c.base_url))
        env = {"C14C_UPSTREAM_KEY": "up-key-123", "C14C_MASTER_KEY": "sk-master-1"}
        proc, _, url = start_cli(
            "--config", str(f), "--port", "0", "--no-access-log", wait=60, env=env
        )
        try:
            client = openai.OpenAI(base_url=f"{url}/v1", api_key="sk-master-1", max_retries=0)
            answers = [
                client.chat.completions.create(
                    model="my-llama",
                    messages=[{"role": "user", "content": f"hi {i}"}],
                    max_tokens=3,
                )
                for i in range(5)
            ]
            assert all(r.choices[0].message.content for r in answers)
            chunks = list(
                client.chat.completions.create(
                    model="my-llama", messages=[{"role": "user", "content": "s"}], stream=True
                )
            )
            assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
            models = {m.id for m in client.models.list()}
            assert {"my-llama", "backup"} <= models
            with pytest.raises(openai.AuthenticationError):
                openai.OpenAI(
                    base_url=f"{url}/v1", api_key="wrong", max_retries=0
                ).chat.completions.create(
                    model="my-llama", messages=[{"role": "user", "content": "x"}]
                )
        finally:
            proc.terminate()
            proc.wait(30)
        served_a = a.stats()["by_path"].get("/v1/chat/completions", 0)
        served_c = c.stats()["by_path"].get("/v1/chat/completions", 0)
    # rpm 2: the first deployment took two; its dead replica refused the connection,
    # so the fallback model served the rest (6 requests in all, none failed)
    assert served_a == 2 and served_c == 4, (served_a, served_c)


def test_unsupported_keys_are_one_error_naming_each(tmp_path: Path) -> None:
    f = tmp_path / "litellm.yaml"
    f.write_text(
        "model_list:\n  - model_name: m\n    litellm_params:\n      model: openai/m\n"
        "      api_base: http://127.0.0.1:9\n      temperature: 0.2\n"
        "litellm_settings:\n  drop_params: true\nrouter_settings:\n  routing_strategy: least-busy\n"
    )
    r = subprocess.run([*CLI, "--config", str(f)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: gateway config ")
    for key in (
        "model_list[0].litellm_params.temperature",
        "litellm_settings.drop_params",
        "router_settings.routing_strategy",
    ):
        assert key in lines[0]
    f.write_text("model_list:\n  - model_name: m\n    litellm_params:\n      model: azure/gpt-4o\n")
    r = subprocess.run([*CLI, "--config", str(f)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "provider 'azure' is not supported" in r.stderr
    f.write_text(
        "model_list:\n  - model_name: m\n    litellm_params:\n      model: openai/m\n"
        "      api_key: sk-literal-key-123\n"
    )
    r = subprocess.run([*CLI, "--config", str(f)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "os.environ/NAME" in r.stderr
    assert "sk-literal-key-123" not in r.stderr
