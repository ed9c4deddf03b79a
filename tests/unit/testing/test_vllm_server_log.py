"""A vLLM server's log folder, where its IPC sockets go too: one the server object made is
removed when it stops (each CI run left two in /tmp, and dozens of sockets), one it was
given is the giver's."""

from __future__ import annotations

import getpass
import tempfile
from pathlib import Path

import pytest

from infersight_testkit import vllm_server
from infersight_testkit.vllm_server import VLLMServer, VLLMSetting


@pytest.fixture(autouse=True)
def _installed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # no process starts here: only the paths it would use
    monkeypatch.setattr(vllm_server, "vllm_python", lambda: tmp_path / "python")
    monkeypatch.setattr(vllm_server, "vllm_model_dir", lambda: tmp_path / "model")


def test_the_folder_it_made_goes_at_stop() -> None:
    server = VLLMServer(VLLMSetting(max_num_seqs=2))
    folder = server.log_path.parent
    assert folder.is_dir() and folder.name.startswith("infersight-vllm-")
    # vLLM's IPC sockets go there too (it leaves them: in /tmp, dozens a test run)
    env = server.environment()
    assert env["VLLM_RPC_BASE_PATH"] == env["TMPDIR"] == str(folder)
    server.stop()
    assert not folder.exists()


def test_a_log_it_was_given_stays(tmp_path: Path) -> None:
    log = tmp_path / "state" / "slots_2.log"
    log.parent.mkdir()
    log.write_text("started\n")
    VLLMServer(VLLMSetting(max_num_seqs=2), log_path=log).stop()
    assert log.read_text() == "started\n"


def test_torchs_kernel_cache_is_linked_in_so_starts_reuse_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # the machine's temp dir, where torch keeps its compiled kernels between starts
    machine = tmp_path / "machine-tmp"
    machine.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(machine))
    log = tmp_path / "state" / "slots_2.log"
    server = VLLMServer(VLLMSetting(max_num_seqs=2), log_path=log)
    with pytest.raises(FileNotFoundError):  # no vLLM here: the process cannot start
        server.spawn()
    shared = machine / f"torchinductor_{getpass.getuser()}"
    link = log.parent / shared.name
    assert link.is_symlink() and link.resolve() == shared.resolve() and shared.is_dir()
