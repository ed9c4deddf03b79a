"""Reading llama.cpp's log for the one line that explains a failed start."""

from __future__ import annotations

import pytest

from infersight.engine._procio import child_env, llama_error_line
from infersight.engine.config import resolve_config
from infersight.engine.threads import SPIN_COUNT


def test_first_error_line_without_timestamp() -> None:
    log = [
        "0.00.004.091 I srv  load_model: loading model",
        "0.00.004.496 E gguf_init_from_reader: failed to read header",
        "0.00.004.566 E llama_model_load: error loading model: failed to load model",
    ]
    assert llama_error_line(log) == "gguf_init_from_reader: failed to read header"


def test_no_error_lines_gives_none() -> None:
    assert llama_error_line([]) is None
    assert llama_error_line(["plain text with E in it", "0.1 I info E not error"]) is None


def test_child_env_sets_the_wait_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOMP_SPINCOUNT", "5")
    env = child_env(resolve_config(omp_wait_policy="active", omp_spin_count=None))
    # ACTIVE with the caller's spin count: both reach the engine process.
    assert env["OMP_WAIT_POLICY"] == "ACTIVE" and env["GOMP_SPINCOUNT"] == "5"
    monkeypatch.delenv("GOMP_SPINCOUNT")
    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    env = child_env(resolve_config(omp_wait_policy="auto"))
    # AUTO: the bounded spin, and no wait policy left over from the caller.
    assert "OMP_WAIT_POLICY" not in env and env["GOMP_SPINCOUNT"] == str(SPIN_COUNT)


def test_client_url_for_wildcard_and_ipv6_binds() -> None:
    from infersight.engine.server_main import client_url

    assert client_url("127.0.0.1", "http://127.0.0.1:8000") == "http://127.0.0.1:8000"
    assert client_url("0.0.0.0", "http://0.0.0.0:8123") == "http://127.0.0.1:8123"
    assert client_url("::1", "http://::1:9000") == "http://[::1]:9000"
    assert client_url("::", "http://[::]:9000/") == "http://[::1]:9000"
    assert client_url("localhost", "http://localhost:1") == "http://localhost:1"


def test_openmp_runtime_is_read_from_the_process_maps() -> None:
    from infersight.engine.server_main import openmp_runtime

    gomp = "7f00-7f10 r-xp 0 08:01 1 /usr/lib/x86_64-linux-gnu/libgomp.so.1.0.0\n"
    assert openmp_runtime(gomp) == "libgomp"
    assert openmp_runtime("7f00 r-xp 0 0 1 /opt/lib/libomp.so\n") == "libomp"
    assert openmp_runtime("7f00 r-xp 0 0 1 /usr/lib/libc.so.6\n") is None
