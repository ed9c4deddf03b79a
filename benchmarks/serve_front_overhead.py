"""What does `infersight serve`'s validating front cost per request?

Side by side in one run, against one embedded llama.cpp engine (SmolLM2-135M): the
same requests go straight to the engine, through a bare byte relay (no parsing, no
checks: what any extra hop costs in Python with uvloop), and through the front, each
relay in its own process as `infersight serve` runs the front. Blocks alternate so
drift on a shared machine hits all three alike. One client on one kept-alive
connection, raw sockets, so the client adds almost nothing.

Printed per request type:
- p50 latency on each path, and what the relay and the front add to the direct p50;
- CPU time of the relay's and the front's process per request (from
  ``/proc/<pid>/task/*/schedstat``: nanoseconds on a CPU; the median over blocks), and
  for streams per SSE chunk.

GET /health and POST /tokenize (a validated JSON body) are answered by the engine in
well under a millisecond, so the front's share is visible; chat completions show it
against real decoding.

    python benchmarks/serve_front_overhead.py --quick     # about 2 minutes
    python benchmarks/serve_front_overhead.py
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from infersight.core.processes import stop_process
from infersight.engine import EmbeddedEngine


@dataclass
class Case:
    name: str
    method: str
    path: str
    body: bytes = b""
    chunks: int = 1  # SSE events per answer (counted at warm-up)
    #: Clients at once, each on its own kept-alive connection (1: one after another).
    concurrency: int = 1
    #: Requests per block for this case (None: the measurement's).
    n: int | None = None


@dataclass
class Side:
    lat: list[float] = field(default_factory=list)
    cpu_per_req: list[float] = field(default_factory=list)  # one figure per block


# -- the client ------------------------------------------------------------------------------
def _request(c: Case, key: str | None) -> bytes:
    head = f"{c.method} {c.path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    if key:
        head += f"Authorization: Bearer {key}\r\n"
    if c.body:
        head += f"Content-Type: application/json\r\nContent-Length: {len(c.body)}\r\n"
    return head.encode() + b"\r\n" + c.body


def _chunked_end(buf: bytes, pos: int) -> bool:
    """Whether the chunked body starting at ``pos`` is complete (walks the chunk sizes)."""
    while True:
        eol = buf.find(b"\r\n", pos)
        if eol < 0:
            return False
        size = int(buf[pos:eol].split(b";")[0], 16)
        if size == 0:
            return buf.find(b"\r\n\r\n", eol) >= 0
        pos = eol + 2 + size + 2
        if pos > len(buf):
            return False


def _read_answer(sock: socket.socket) -> bytes:
    buf = b""
    while True:
        piece = sock.recv(65536)
        if not piece:
            raise ConnectionResetError("closed before the answer ended")
        buf += piece
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            continue
        head = buf[:end].lower()
        if b"transfer-encoding: chunked" in head:
            if _chunked_end(buf, end + 4):
                return buf
        elif b"content-length:" not in head:
            raise RuntimeError(f"an answer without framing: {buf[:300]!r}")
        elif len(buf) >= end + 4 + int(head.split(b"content-length:")[1].split(b"\r\n")[0]):
            return buf


def _connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def run_block(port: int, req: bytes, n: int) -> tuple[list[float], bytes]:
    out, answer = [], b""
    sock = _connect(port)
    try:
        for _ in range(n):
            t = time.perf_counter()
            try:
                sock.sendall(req)
                answer = _read_answer(sock)
            except (ConnectionResetError, BrokenPipeError):
                # llama.cpp's HTTP server closes a connection after a streamed answer
                # and after 100 requests: reconnecting is the direct client's cost (the
                # front keeps the client's connection and reconnects to the engine).
                sock.close()
                sock = _connect(port)
                sock.sendall(req)
                answer = _read_answer(sock)
            out.append(time.perf_counter() - t)
    finally:
        sock.close()
    return out, answer


def run_blocks(port: int, req: bytes, n: int, concurrency: int) -> tuple[list[float], bytes]:
    """``n`` requests from ``concurrency`` clients at once (threads: the socket calls
    release the GIL), each on its own connection."""
    if concurrency == 1:
        return run_block(port, req, n)
    with ThreadPoolExecutor(concurrency) as pool:
        parts = list(pool.map(lambda _: run_block(port, req, n // concurrency),
                              range(concurrency)))
    return [x for lat, _ in parts for x in lat], parts[-1][1]


# -- the relays, each in its own process -------------------------------------------------------
def _cpu_ns(pid: int) -> int:
    """Nanoseconds the process's threads spent on a CPU (Linux schedstat)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            total += int((task / "schedstat").read_text().split()[0])
    return total


@contextlib.contextmanager
def child(mode: str, engine: EmbeddedEngine, key: str) -> Iterator[tuple[int, int]]:
    """(port, pid) of ``--front-child`` or ``--relay-child`` running this file."""
    proc = subprocess.Popen(
        [sys.executable, __file__, f"--{mode}-child", str(engine.port), engine.model_name],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(key + "\n")  # never on the command line
    proc.stdin.flush()
    try:
        line = proc.stdout.readline()
        if not line.startswith("port "):
            raise RuntimeError(f"the {mode} did not start: {line!r}")
        yield int(line.split()[1]), proc.pid
    finally:
        stop_process(proc, 10)


def _front_child(engine_port: int, model: str) -> None:
    from infersight.gateway.front import FrontConfig, run_front

    key = sys.stdin.readline().strip()
    cfg = FrontConfig(engine_host="127.0.0.1", engine_port=engine_port, engine_key=key,
                      model=model, port=0)
    run_front(cfg, on_ready=lambda f: print(f"port {f.port}", flush=True), alive=lambda: True)


class _Up(asyncio.Protocol):
    def __init__(self, client: asyncio.Transport) -> None:
        self.client = client

    def data_received(self, data: bytes) -> None:
        self.client.write(data)

    def connection_lost(self, exc: BaseException | None) -> None:
        self.client.close()


def _relay_child(engine_port: int, _model: str) -> None:
    """A bare byte relay: one engine connection per client connection, bytes as read."""
    import uvloop

    class Down(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.t: asyncio.Transport = transport  # type: ignore[assignment]
            self.up: asyncio.Transport | None = None
            self.early: list[bytes] = []
            asyncio.get_running_loop().create_task(self.open())

        async def open(self) -> None:
            self.up, _ = await asyncio.get_running_loop().create_connection(
                lambda: _Up(self.t), "127.0.0.1", engine_port)
            for d in self.early:
                self.up.write(d)

        def data_received(self, data: bytes) -> None:
            if self.up is None:
                self.early.append(data)
            else:
                self.up.write(data)

        def connection_lost(self, exc: BaseException | None) -> None:
            if self.up is not None:
                self.up.close()

    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(Down, "127.0.0.1", 0)
        print(f"port {server.sockets[0].getsockname()[1]}", flush=True)
        await asyncio.Event().wait()

    sys.stdin.readline()
    uvloop.run(main())


# -- measuring ---------------------------------------------------------------------------------
def measure(cases: list[Case], engine: EmbeddedEngine, key: str, n: int, blocks: int) -> None:
    with child("relay", engine, key) as relay, child("front", engine, key) as front:
        paths = {"direct": (engine.port, None), "relay": relay, "front": front}
        res = {c.name: {p: Side() for p in paths} for c in cases}
        for c in cases:  # warm every path (connections, caches, the prompt cache)
            for name, (port, _) in paths.items():
                _, answer = run_block(port, _request(c, key if name != "front" else None), 3)
            c.chunks = max(1, answer.count(b"data: "))
        order = list(paths)
        for b in range(blocks):
            for c in cases:
                for name in order[b % 3 :] + order[: b % 3]:
                    port, pid = paths[name]
                    req = _request(c, key if name != "front" else None)
                    c0 = _cpu_ns(pid) if pid else 0
                    lat, _ = run_blocks(port, req, c.n or n, c.concurrency)
                    side = res[c.name][name]
                    side.lat += lat
                    if pid:
                        side.cpu_per_req.append((_cpu_ns(pid) - c0) / 1e3 / len(lat))
        report(cases, res)


def report(cases: list[Case], res: dict[str, dict[str, Side]]) -> None:
    print(f"\n{'request':<26} {'n':>5} {'direct p50':>11} {'+relay p50':>11} {'+front p50':>11} "
          f"{'relay CPU/req':>14} {'front CPU/req':>14} {'front-relay':>12} {'front/chunk':>12}")
    for c in cases:
        d, r, f = (res[c.name][p] for p in ("direct", "relay", "front"))
        dp, rp, fp = (float(np.percentile(s.lat, 50)) * 1e6 for s in (d, r, f))
        rc, fc = float(np.median(r.cpu_per_req)), float(np.median(f.cpu_per_req))
        per_chunk = f"{fc / c.chunks:9.1f}us" if c.chunks > 1 else ""
        print(f"{c.name:<26} {len(f.lat):>5} {dp:>9.0f}us {rp - dp:>+9.0f}us {fp - dp:>+9.0f}us "
              f"{rc:>12.0f}us {fc:>12.0f}us {fc - rc:>+10.0f}us {per_chunk:>12}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="about 2 minutes")
    ap.add_argument("--front-child", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--relay-child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.front_child or args.relay_child:
        port, model = args.front_child or args.relay_child
        (_front_child if args.front_child else _relay_child)(int(port), model)
        return
    n, blocks, n_chat = (300, 6, 8) if args.quick else (1000, 9, 40)
    key = secrets.token_urlsafe(32)
    with EmbeddedEngine(parallel=2, ctx=2048, api_key=key) as engine:
        chat = {"model": engine.model_name,
                "messages": [{"role": "user", "content": "Count to 20"}]}
        print(f"engine: llama.cpp {engine.model_name}, {os.cpu_count()} CPUs; {blocks} "
              f"alternating blocks per path; CPU/req is the median over blocks")
        measure([
            Case("GET /health", "GET", "/health"),
            Case("POST /tokenize", "POST", "/tokenize",
                 json.dumps({"content": "The quick brown fox " * 8}).encode()),
        ], engine, key, n, blocks)
        one = json.dumps({**chat, "max_tokens": 1}).encode()
        measure([
            Case("chat, 1 token", "POST", "/v1/chat/completions", one),
            # Under load the front's code stays in the CPU's caches: after each engine
            # step a lone request finds it evicted (the sequential row's cost).
            Case("chat, 1 token, 4 at once", "POST", "/v1/chat/completions", one,
                 concurrency=4),
            Case("chat stream, 16 tokens", "POST", "/v1/chat/completions",
                 json.dumps({**chat, "max_tokens": 16, "stream": True, "temperature": 0,
                             "ignore_eos": True}).encode(), n=max(4, n_chat // 4)),
        ], engine, key, n_chat, blocks)


if __name__ == "__main__":
    main()
