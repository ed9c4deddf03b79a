"""Adopting a vLLM server that ``tests/support/vllm_servers.py start`` left: every state
file that names no ready server is refused in one line that says why."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from infersight.core.errors import ConfigError
from support.vllm_servers import adopt


def test_a_missing_state_file_names_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no vLLM server was started for slots_2"):
        adopt(tmp_path / "slots_2.json")


def test_a_start_that_failed_passes_its_error_on(tmp_path: Path) -> None:
    state = tmp_path / "kv_16_blocks.json"
    state.write_bytes(orjson.dumps({"error": "vLLM did not start (--max-num-seqs 16): boom"}))
    with pytest.raises(ConfigError, match="boom"):
        adopt(state)


def test_a_server_still_starting_is_not_adopted(tmp_path: Path) -> None:
    state = tmp_path / "slots_2.json"
    doc = {"setting": {}, "port": 1, "pid": 1, "log": "/tmp/vllm.log", "ready": False}
    state.write_bytes(orjson.dumps(doc))
    with pytest.raises(ConfigError, match="never became ready"):
        adopt(state)
