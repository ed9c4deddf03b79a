"""Start any server for one trial from a command template (docs/design.md section 8).

``--launch 'vllm serve M --max-num-seqs {max_num_seqs} --port {port}'``: each trial
fills the placeholders, runs the command through ``/bin/sh`` in a process group of its
own (so the server a shell or wrapper starts is stopped with it), waits until it
answers its health path, and stops the group by its id when the trial ends: SIGTERM,
then SIGKILL after a grace. A server that exits at once, finds its port taken, says it
ran out of memory, or is not healthy within ``--start-timeout`` raises the typed error
(:class:`~infersight.core.errors.LaunchError`, or
:class:`~infersight.core.errors.OutOfMemory`), which the trial records.
"""

from __future__ import annotations

import contextlib
import string
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path

from infersight.client.errors_map import is_out_of_memory
from infersight.core.endpoint import Endpoint
from infersight.core.errors import ConfigError, LaunchError, OutOfMemory
from infersight.core.listen import free_port
from infersight.core.processes import stop_process

__all__ = ["PLACEHOLDERS", "launched", "template_knobs"]

#: Placeholder -> the knob it carries (None: not a knob). The slot limit goes by each
#: engine's own name (design section 5's table); ``ctx`` is the total context.
PLACEHOLDERS: dict[str, str | None] = {
    "port": None,
    "host": None,
    "slots": "slots",
    "max_num_seqs": "slots",
    "parallel": "slots",
    "max_running_requests": "slots",
    "max_concurrent_requests": "slots",
    "threads": "threads",
    "ctx": "ctx",
    "ctx_per_slot": "ctx",
}
#: Lines of the server's output kept for the error message.
_TAIL_BYTES = 4096
_ADDRESS_IN_USE = ("address already in use", "eaddrinuse", "address in use")


def template_knobs(template: str) -> set[str]:
    """The knobs a template can change; one ConfigError line for a bad template."""
    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(template) if f is not None}
    except ValueError as e:
        raise ConfigError(f"--launch: {e} (write a literal brace as {{{{ or }}}})") from None
    unknown = sorted(f for f in fields if f not in PLACEHOLDERS)
    if unknown:
        raise ConfigError(
            f"--launch: unknown placeholder {{{unknown[0]}}}; use "
            f"{', '.join('{' + p + '}' for p in PLACEHOLDERS)}"
        )
    if "port" not in fields:
        raise ConfigError("--launch needs {port}: each trial gets a free port of its own")
    return {k for f in fields if (k := PLACEHOLDERS[f]) is not None}


def _tail(log: Path) -> str:
    try:
        with log.open("rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - _TAIL_BYTES))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else "(no output)"


def _exited(proc: subprocess.Popen[bytes], log: Path) -> LaunchError | OutOfMemory:
    text = _tail(log)
    code = proc.returncode
    if is_out_of_memory(text):
        oom = next(
            (ln for ln in reversed(text.splitlines()) if is_out_of_memory(ln)), _last_line(text)
        )
        return OutOfMemory(f"the server ran out of memory while starting: {oom.strip()[:300]}")
    if any(m in text.lower() for m in _ADDRESS_IN_USE):
        return LaunchError(
            f"the server's port was taken: {_last_line(text)}", reason="port_taken", exit_code=code
        )
    return LaunchError(
        f"the server exited with status {code} before it was healthy: {_last_line(text)}",
        reason="exited",
        exit_code=code,
    )


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2.0) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError, TimeoutError):
        return False


@contextlib.contextmanager
def launched(
    template: str,
    setting: Mapping[str, int],
    *,
    log: Path,
    start_timeout: float,
    health_path: str = "/health",
    host: str = "127.0.0.1",
    grace: float = 10.0,
) -> Iterator[Endpoint]:
    """The server of one trial, healthy, for the ``with`` block; stopped after it."""
    port = free_port(host)
    slots, ctx = setting.get("slots"), setting.get("ctx")
    values = {
        "port": port,
        "host": host,
        "threads": setting.get("threads"),
        **dict.fromkeys(
            (
                "slots",
                "max_num_seqs",
                "parallel",
                "max_running_requests",
                "max_concurrent_requests",
            ),
            slots,
        ),
        "ctx_per_slot": ctx,
        "ctx": None if ctx is None or slots is None else ctx * slots,
    }
    command = template.format(**values)
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        proc = subprocess.Popen(
            ["/bin/sh", "-c", command],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    try:
        url = f"http://{host}:{port}"
        deadline = time.monotonic() + start_timeout
        while True:
            if proc.poll() is not None:
                raise _exited(proc, log)
            if _healthy(url + health_path) and proc.poll() is None:
                break
            if time.monotonic() >= deadline:
                raise LaunchError(
                    f"the server was not healthy at {health_path} within {start_timeout:g} s "
                    f"(--start-timeout): {_last_line(_tail(log))}",
                    reason="start_timeout",
                )
            time.sleep(0.2)
        yield Endpoint(url=url, started_by="tune", pid=proc.pid, slots=slots)
    finally:
        stop_process(proc, grace, group=True)
