"""`infersight serve` as a user runs it: a real subprocess, real signals."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.waiting import until_blocking

pytestmark = pytest.mark.engine

_URL = re.compile(r"listening on (http://127\.0\.0\.1:(\d+))")


def _cmd(*args: str) -> list[str]:
    exe = shutil.which("infersight", path=str(Path(sys.executable).parent))
    if exe:
        return [exe, "serve", *args]
    return [sys.executable, "-c", "from infersight.cli import main; main()", "serve", *args]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERSIGHT_")}
    env.update(extra)
    return env


def _run(*args: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _cmd(*args), capture_output=True, text=True, timeout=timeout, env=_env(**env)
    )


class Served:
    def __init__(self, proc: subprocess.Popen[str], url: str, banner: list[str]) -> None:
        self.proc, self.url, self.banner = proc, url, banner

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def stop(self) -> None:
        """SIGINT (a clean stop), then a kill if it does not exit in 30 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _start(*args: str, **env: str) -> Served:
    proc = subprocess.Popen(
        _cmd(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(**env)
    )
    assert proc.stdout is not None
    banner: list[str] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            err = proc.stderr.read() if proc.stderr else ""
            raise AssertionError(f"serve exited early: rc={proc.wait()} stderr={err!r}")
        banner.append(line.rstrip("\n"))
        if line.startswith("Press Ctrl-C"):
            m = _URL.search(banner[0])
            assert m, banner
            return Served(proc, m.group(1), banner)
    proc.kill()
    raise AssertionError(f"no start-up banner: {banner}")


@pytest.fixture
def served() -> Iterator[Served]:
    s = _start("--port", "0", "--parallel", "2", "--ctx", "1024")
    yield s
    if s.proc.poll() is None:
        s.proc.kill()
        s.proc.wait()


def _engine_children(pid: int) -> list[int]:
    import psutil

    return [c.pid for c in psutil.Process(pid).children(recursive=True)]


def test_serve_prints_url_model_slots_threads_and_stops_on_sigint(served: Served) -> None:
    text = "\n".join(served.banner)
    assert "SmolLM2-135M-Instruct" in text
    assert re.search(r"slots\s+2 x 512 tokens", text)
    # The thread count and how waiting threads behave, and that the environment
    # overrides it (issue 13: the choice is shown at start-up).
    assert re.search(
        r"threads\s+\d+ \(the physical cores\); waiting threads spin \d+ turns, "
        r"then sleep \(OMP_WAIT_POLICY / GOMP_SPINCOUNT change it\)",
        text,
    ), text
    port = int(served.url.rsplit(":", 1)[1])
    assert port != 8000 and port > 0  # --port 0 picked a free port and printed it
    body = json.dumps(
        {
            "model": "SmolLM2-135M-Instruct",
            "messages": [{"role": "user", "content": "hi"}],
            "max_tokens": 3,
        }
    ).encode()
    req = urllib.request.Request(
        served.url + "/v1/chat/completions", body, {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        assert json.loads(r.read())["usage"]["completion_tokens"] >= 1
    children = _engine_children(served.proc.pid)
    assert children, "the engine runs in a child process"
    served.proc.send_signal(signal.SIGINT)
    _, err = served.proc.communicate(timeout=30)
    assert served.proc.returncode == 0
    assert "Traceback" not in err
    import psutil

    until_blocking(
        lambda: not [c for c in children if psutil.pid_exists(c)], "the engine to be gone"
    )


def test_serve_shows_a_wait_policy_from_the_environment() -> None:
    s = _start("--port", "0", "--parallel", "1", "--ctx", "512", OMP_WAIT_POLICY="passive")
    try:
        line = next(ln for ln in s.banner if ln.strip().startswith("threads"))
        assert "sleep at once" in line and "from $OMP_WAIT_POLICY" in line, line
        (child,) = _engine_children(s.proc.pid)
        with open(f"/proc/{child}/environ", "rb") as f:
            environ = f.read().split(b"\0")
        assert b"OMP_WAIT_POLICY=PASSIVE" in environ
        assert not [v for v in environ if v.startswith(b"GOMP_SPINCOUNT=")]
    finally:
        s.proc.kill()
        s.proc.wait()


def test_serve_stops_on_sigterm(served: Served) -> None:
    served.proc.send_signal(signal.SIGTERM)
    _, err = served.proc.communicate(timeout=30)
    assert served.proc.returncode == 0 and "Traceback" not in err


def _assert_one_line_error(res: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert res.returncode != 0
    assert "Traceback" not in res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("error: ")
    for n in needles:
        assert n in lines[0], lines[0]


def test_missing_model_is_one_line(tmp_path: Path) -> None:
    res = _run("--model", str(tmp_path / "nope.gguf"), "--port", "0")
    _assert_one_line_error(res, "model file not found", "nope.gguf")


def test_not_gguf_model_is_one_line(tmp_path: Path) -> None:
    f = tmp_path / "model.safetensors"
    f.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}")
    _assert_one_line_error(_run("--model", str(f), "--port", "0"), "not a GGUF")


def test_port_in_use_is_one_line() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        res = _run("--port", str(port), "--parallel", "1", "--ctx", "512")
    _assert_one_line_error(res, f"port {port}", "in use")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--parallel", "0"], "--parallel"),
        (["--threads", "-2"], "--threads"),
        (["--port", "99999"], "--port"),
        (["--parallel", "4", "--ctx", "100"], "tokens per slot"),
    ],
)
def test_bad_option_values_are_one_line(args: list[str], needle: str) -> None:
    _assert_one_line_error(_run(*args), needle)


def test_placeholder_key_refused_and_never_printed(tmp_path: Path) -> None:
    res = _run("--port", "0", INFERSIGHT_API_KEY="sk-xxxxxxxxxxxxxxxx")
    _assert_one_line_error(res, "INFERSIGHT_API_KEY", "placeholder")
    assert "sk-xxxx" not in res.stderr + res.stdout
    keyfile = tmp_path / "key"
    keyfile.write_text("YOUR_API_KEY\n")
    res = _run("--port", "0", "--api-key-file", str(keyfile))
    _assert_one_line_error(res, str(keyfile))
    assert "YOUR_API_KEY" not in res.stderr + res.stdout


def test_api_key_from_file_is_required_and_not_printed(tmp_path: Path) -> None:
    key = "is-test-" + os.urandom(8).hex()
    keyfile = tmp_path / "key"
    keyfile.write_text(key + "\n")
    s = _start("--port", "0", "--parallel", "1", "--ctx", "512", "--api-key-file", str(keyfile))
    try:
        assert "required" in "\n".join(s.banner)
        req = urllib.request.Request(s.url + "/v1/models")
        with pytest.raises(urllib.error.HTTPError) as ei:
            urllib.request.urlopen(req, timeout=30)
        assert ei.value.code == 401
        req.add_header("Authorization", f"Bearer {key}")
        with urllib.request.urlopen(req, timeout=30) as r:
            assert r.status == 200
        s.proc.send_signal(signal.SIGINT)
        out, err = s.proc.communicate(timeout=30)
        assert s.proc.returncode == 0
        assert key not in "\n".join(s.banner) + out + err
    finally:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()


def test_engine_crash_is_reported_in_one_line(served: Served) -> None:
    children = _engine_children(served.proc.pid)
    assert children
    for pid in children:
        os.kill(pid, signal.SIGKILL)
    _, err = served.proc.communicate(timeout=30)
    assert served.proc.returncode == 1
    assert "Traceback" not in err
    errors = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1 and "exited unexpectedly" in errors[0]


def test_monitor_watches_the_llama_cpp_child_not_the_front(served: Served, tmp_path: Path) -> None:
    """The process that computes for `serve` is its llama.cpp child: monitor (and bench,
    through the same lookup) samples that one, not the HTTP front."""
    import psutil

    from infersight.telemetry import read_samples
    from infersight.telemetry.server_process import listening_pid, server_pid

    assert listening_pid(served.url) == served.proc.pid
    engine = server_pid(served.url)
    assert engine in _engine_children(served.proc.pid)
    assert "infersight.engine" in " ".join(psutil.Process(engine).cmdline())
    rec = tmp_path / "mon.jsonl"
    cli = [
        *_cmd()[:-1],
        "monitor",
        served.url,
        "--duration",
        "2.5s",
        "--interval",
        "0.5s",
        "--no-gpu",
        "--record",
        str(rec),
    ]
    res = subprocess.run(cli, capture_output=True, text=True, timeout=60, env=_env())
    assert res.returncode == 0, res.stderr
    samples, _ = read_samples(rec)
    watched = {
        s.labels.get("pid")
        for s in samples
        if s.name == "process.cpu_percent" and s.labels.get("name") == "engine"
    }
    assert watched == {str(engine)}
