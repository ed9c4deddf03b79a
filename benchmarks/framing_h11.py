"""Request framing: the gateway's HTTP stack against h11, case by case.

Each case of the corpus (benchmarks/_framing_cases.py: CL.TE, TE.CL, duplicated or
signed Content-Length, bare LF in chunk lines, obs-fold, HTTP/0.9 and 2.0, invalid
trailers, and well-formed controls) is sent on its own connection to the stack every
`infersight gateway` and `infersight serve` listens with (gateway.listener and
gateway.request_guard, aiohttp's parser), and read by h11 as a strict HTTP/1.1 server
would. The table says, per case, how many requests each accepted and whether it
refused the rest; the verdict is "same", "stricter" or "LESS STRICT" (a request h11
refuses but the server accepts, or a different body: the start of request smuggling).

    python benchmarks/framing_h11.py
"""

from __future__ import annotations

import asyncio
import sys

from _framing_cases import CASES, Reading, digest, echo_stack, h11_reading, server_reading
from infersight.gateway.listener import ClientLimits

LIMITS = ClientLimits(head_timeout_s=0.5, body_timeout_s=0.5, keepalive_timeout_s=0.5)


def _what(r: Reading) -> str:
    n = len(r.bodies)
    return f"{n} accepted" + (", then refused" if r.refused else "")


def verdict(ref: Reading, got: Reading) -> str:
    want = [digest(b) for b in ref.bodies]
    if len(got.bodies) > len(want) or got.bodies != want[: len(got.bodies)]:
        return "LESS STRICT"
    return "same" if len(got.bodies) == len(want) else "stricter"


async def main() -> int:
    rows = []
    async with echo_stack(LIMITS) as port:
        for name, raw in CASES.items():
            ref = h11_reading(raw)
            got = await server_reading(port, raw)
            status = ",".join(str(s) for s in got.statuses) or "closed"
            rows.append((name, _what(ref), _what(got), status, verdict(ref, got)))
    width = max(len(r[0]) for r in rows)
    print(f"{'case':<{width}}  {'h11':<26}{'gateway/serve':<26}{'answers':<12}verdict")
    for name, ref, got, status, v in rows:
        print(f"{name:<{width}}  {ref:<26}{got:<26}{status:<12}{v}")
    counts = {v: sum(1 for r in rows if r[4] == v) for v in ("same", "stricter", "LESS STRICT")}
    print(f"\n{len(rows)} cases: " + ", ".join(f"{n} {v}" for v, n in counts.items()))
    return 1 if counts["LESS STRICT"] else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
