"""Keyless abuse of `infersight serve`: what three attacks cost the serving processes.

A fresh `infersight serve` (with an API key, so the attacker has none) per attack and
per revision, this checkout's and a baseline's (``--baseline REV``, default main, run
from a ``git archive`` of its ``src`` with this virtual environment), one after the
other. During each attack a prober opens a new connection for ``GET /health`` every
0.1 s; the serving processes (serve and the llama.cpp child) are sampled every 10 ms.

- ``chunked-health``: ``GET /health`` with a 1 MiB chunked body sent in 1-byte chunks
  (6 MiB on the wire);
- ``pipelined-models``: 8 MiB of pipelined ``GET /v1/models`` whose answers are never
  read;
- ``slow-then-pipelined``: a keyed slow request (a 256-token chat), then 32 MiB of
  pipelined requests behind it.

The goal, per attack: peak RSS grows by at most 32 MiB while another client's /health
answers within 0.5 s. An attack's sender stops when the server stops reading (its
socket stays full for 5 s) or after 20 s.

    python benchmarks/serve_abuse.py                  # this checkout and main
    python benchmarks/serve_abuse.py --baseline none  # this checkout only
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil

from _baseline import baseline_src
from infersight.core.processes import stop_process

KEY = "bench-abuse-" + os.urandom(6).hex()
MIB = 2**20
_URL = re.compile(r"listening on http://127\.0\.0\.1:(\d+)")


@dataclass
class Result:
    sent: int = 0
    peak_growth: int = 0
    health_max: float = 0.0
    health_fails: int = 0


@contextlib.contextmanager
def serve(src: Path | None) -> Iterator[tuple[int, int]]:
    """`infersight serve` (2 slots, a key) from ``src`` (None: this checkout): (port, pid)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERSIGHT_")}
    env["INFERSIGHT_API_KEY"] = KEY
    if src is not None:
        env["PYTHONPATH"] = str(src)
    cmd = [
        sys.executable,
        "-c",
        "from infersight.cli import main; main()",
        "serve",
        "--port",
        "0",
        "--parallel",
        "2",
        "--ctx",
        "1024",
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    try:
        assert proc.stdout is not None
        port = None
        deadline = time.monotonic() + 120
        while port is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"serve exited early ({proc.wait()})")
            if m := _URL.search(line):
                port = int(m.group(1))
        assert port is not None
        threading.Thread(target=proc.stdout.read, daemon=True).start()  # drain stdout
        yield port, proc.pid
    finally:
        stop_process(proc, grace=30)  # SIGTERM: serve stops cleanly


def rss(pid: int) -> int:
    p = psutil.Process(pid)
    total = p.memory_info().rss
    for c in p.children(recursive=True):
        with contextlib.suppress(psutil.Error):
            total += c.memory_info().rss
    return total


def _send_all(sock: socket.socket, pieces: Iterator[bytes], until: float, res: Result) -> None:
    """Send as long as the server reads: stop when a send waits 5 s, or at ``until``."""
    sock.settimeout(5.0)
    for piece in pieces:
        if time.monotonic() > until:
            return
        try:
            sock.sendall(piece)
        except OSError:  # full for 5 s (TimeoutError), or closed by the server
            return
        res.sent += len(piece)


def chunked_health(port: int, until: float, res: Result) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        head = b"GET /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
        block = b"1\r\nx\r\n" * 4096
        _send_all(sock, iter([head, *([block] * (MIB // 4096)), b"0\r\n\r\n"]), until, res)


def pipelined_models(port: int, until: float, res: Result) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        req = b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"
        block = req * (65536 // len(req))
        _send_all(sock, iter([block] * (8 * MIB // len(block))), until, res)


def slow_then_pipelined(port: int, until: float, res: Result) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        body = json.dumps(
            {
                "model": "SmolLM2-135M-Instruct",
                "max_tokens": 256,
                "messages": [{"role": "user", "content": "Tell a long story."}],
                "ignore_eos": True,
            }
        ).encode()
        slow = (
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
            b"application/json\r\nAuthorization: Bearer "
            + KEY.encode()
            + b"\r\nContent-Length: "
            + str(len(body)).encode()
            + b"\r\n\r\n"
            + body
        )
        req = b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n"
        block = req * (65536 // len(req))
        _send_all(sock, iter([slow, *([block] * (32 * MIB // len(block)))]), until, res)


ATTACKS: dict[str, Callable[[int, float, Result], None]] = {
    "chunked-health": chunked_health,
    "pipelined-models": pipelined_models,
    "slow-then-pipelined": slow_then_pipelined,
}


def health_once(port: int) -> float | None:
    t0 = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            if not s.recv(64).startswith(b"HTTP/1.1 200"):
                return None
    except OSError:
        return None
    return time.monotonic() - t0


def run_attack(src: Path | None, attack: Callable[[int, float, Result], None]) -> Result:
    res = Result()
    with serve(src) as (port, pid):
        for _ in range(5):  # warm: the first answers load code
            health_once(port)
        time.sleep(1.0)
        base = rss(pid)
        peak = base
        done = threading.Event()
        until = time.monotonic() + 20

        def sampler() -> None:
            nonlocal peak
            while not done.is_set():
                with contextlib.suppress(psutil.Error):
                    peak = max(peak, rss(pid))
                time.sleep(0.01)

        def prober() -> None:
            while not done.is_set():
                took = health_once(port)
                if took is None:
                    res.health_fails += 1
                else:
                    res.health_max = max(res.health_max, took)
                time.sleep(0.1)

        threads = [threading.Thread(target=f, daemon=True) for f in (sampler, prober)]
        for t in threads:
            t.start()
        attacker = threading.Thread(target=attack, args=(port, until, res), daemon=True)
        attacker.start()
        attacker.join(25)
        time.sleep(0.5)  # what the server still holds just after
        done.set()
        for t in threads:
            t.join(10)
        res.peak_growth = peak - base
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="main", help="git revision to run beside ('none': skip)")
    ap.add_argument("--only", action="append", default=[], choices=sorted(ATTACKS))
    args = ap.parse_args()
    sides: list[tuple[str, Path | None]] = [("this", None)]
    if args.baseline != "none":
        sides.append((args.baseline, baseline_src(args.baseline)))
    print(
        f"{os.cpu_count()} CPUs, load avg {os.getloadavg()[0]:.1f}; goal: peak RSS +32 MiB "
        "at most, another client's /health within 0.5 s"
    )
    print(
        f"{'attack':<22}{'serve':<10}{'sent MiB':>10}{'peak RSS +MiB':>15}"
        f"{'/health max s':>15}{'failed':>8}  goal"
    )
    failed = False
    for name in args.only or list(ATTACKS):
        for side, src in sides:
            r = run_attack(src, ATTACKS[name])
            ok = r.peak_growth <= 32 * MIB and r.health_max <= 0.5 and not r.health_fails
            failed |= side == "this" and not ok
            print(
                f"{name:<22}{side:<10}{r.sent / MIB:>10.1f}{r.peak_growth / MIB:>15.1f}"
                f"{r.health_max:>15.3f}{r.health_fails:>8}  {'met' if ok else 'NOT met'}",
                flush=True,
            )
    print(f"(load avg {os.getloadavg()[0]:.1f})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
