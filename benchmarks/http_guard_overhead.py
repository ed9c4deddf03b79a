"""What the slow-client guard (infersight.core.httpguard) costs per request.

The same trivial aiohttp app (POST, read a small JSON body, answer JSON) is served by a
plain ``web.AppRunner`` and by ``GuardedRunner`` (head/body/idle timeouts, per-address
connection cap, JSON framing errors), each in its own process, loaded in turn by one
client process over keep-alive connections. Reported side by side: requests/s, the
server's CPU microseconds per request (its own ``process_time``), and the ratio.

    python benchmarks/http_guard_overhead.py --quick
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import statistics
import time
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from infersight.core.httpguard import GuardedRunner, GuardSettings

BODY = orjson.dumps({"model": "m", "messages": [{"role": "user", "content": "hello " * 20}]})


async def _answer(request: web.Request) -> web.Response:
    doc = orjson.loads(await request.read())
    return web.Response(body=orjson.dumps({"ok": len(doc["messages"])}),
                        content_type="application/json")


async def _cpu(request: web.Request) -> web.Response:
    return web.Response(text=repr(time.process_time()))


def _serve(guarded: bool, port_q: Any, stop: Any) -> None:
    async def main() -> None:
        app = web.Application()
        app.router.add_post("/x", _answer)
        app.router.add_get("/cpu", _cpu)
        runner: web.AppRunner = (GuardedRunner(app, GuardSettings(), access_log=None)
                                 if guarded else web.AppRunner(app, access_log=None))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port_q.put(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]
        while not stop.is_set():
            await asyncio.sleep(0.1)
        await runner.cleanup()

    asyncio.run(main())


async def _load(port: int, seconds: float, concurrency: int) -> tuple[float, float]:
    """(requests/s, server CPU us per request) for ``seconds`` of closed-loop load."""
    url = f"http://127.0.0.1:{port}"
    done = 0
    conn = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=conn) as s:
        async def cpu() -> float:
            async with s.get(url + "/cpu") as r:
                return float(await r.text())

        async def worker(until: float) -> None:
            nonlocal done
            while time.monotonic() < until:
                async with s.post(url + "/x", data=BODY) as r:
                    await r.read()
                done += 1

        await asyncio.gather(*(worker(time.monotonic() + 0.5) for _ in range(concurrency)))
        done = 0
        c0, t0 = await cpu(), time.monotonic()
        await asyncio.gather(*(worker(t0 + seconds) for _ in range(concurrency)))
        elapsed, c1 = time.monotonic() - t0, await cpu()
    return done / elapsed, (c1 - c0) / max(1, done) * 1e6


def measure(guarded: bool, seconds: float, concurrency: int) -> tuple[float, float]:
    ctx = mp.get_context("spawn")
    port_q, stop = ctx.Queue(), ctx.Event()
    proc = ctx.Process(target=_serve, args=(guarded, port_q, stop), daemon=True)
    proc.start()
    try:
        port = port_q.get(timeout=30)
        return asyncio.run(_load(port, seconds, concurrency))
    finally:
        stop.set()
        proc.join(10)
        if proc.is_alive():
            proc.kill()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 rounds of 2 s (else 5 of 5 s)")
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()
    rounds, seconds = (2, 2.0) if args.quick else (5, 5.0)
    res: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
    for _ in range(rounds):  # interleaved, so drift on a shared host hits both alike
        for guarded in (False, True):
            res[guarded].append(measure(guarded, seconds, args.concurrency))
    print(f"{'server':<10} {'req/s':>10} {'server CPU us/req':>18}")
    med = {g: (statistics.median(r for r, _ in v), statistics.median(c for _, c in v))
           for g, v in res.items()}
    for g, name in ((False, "plain"), (True, "guarded")):
        print(f"{name:<10} {med[g][0]:>10.0f} {med[g][1]:>18.1f}")
    rps = med[True][0] / med[False][0]
    print(f"guarded/plain: req/s x{rps:.3f}, CPU per request "
          f"{med[True][1] - med[False][1]:+.1f} us ({med[True][1] / med[False][1]:.3f}x)")


if __name__ == "__main__":
    main()
