"""The model run forward: a discrete-event simulation of the server (docs/design.md
section 9).

Requests arrive (open loop: at given times; closed loop: N clients, each sending again
a think time after its answer), wait FIFO for a slot and, where KV is known, for their
tokens to fit, then take ``e + κ·step(n) + c_first·p`` to their first token and one
token per decode step after it. An engine that prefills in batches (``batch_prefill``)
computes the prompts admitted together in one step of ``κ·step(n) + c_first·Σp``
(those admitted within a step of each other are together) and each gets its first token
``e`` after that step ends; a prompt admitted while the step runs waits for it to end,
and one admitted while requests decode is prefilled when the decode step in progress
ends (the scheduler runs between steps). All running requests share the decode
steps: the engine's work clock advances at one step per
``step(n)`` seconds, and stops for ``c·p`` seconds whenever a request with ``p`` prompt
tokens is admitted (its prefill step). Events are arrivals, first tokens and ends, so
the cost grows with requests, not tokens.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

__all__ = ["Engine", "Load", "Simulated", "simulate"]


@dataclass(frozen=True, slots=True)
class Engine:
    """The server's fitted numbers (plain floats: the simulation's hot loop)."""

    slots: float | None
    kv: float | None
    kv_reserve: bool
    a: float
    b: float
    k: float
    c: float
    e: float
    kappa: float
    c_first: float
    error_share: float = 0.0
    #: Past this many running sequences the step time grows at least in proportion
    #: to the running count (None: as fitted). A run that never had more running
    #: says nothing about the step time beyond it; this is the pessimistic reading.
    saturate: float | None = None
    #: Past this many running sequences the step time stays what it is there (None: as
    #: fitted): every added sequence is free, the optimistic reading of the same gap.
    flat: float | None = None
    #: Prompts admitted together are prefilled in one step and share its first token.
    batch_prefill: bool = False
    #: Tokens per KV block: each request holds whole blocks (1: tokens, as fitted).
    block: float = 1.0

    def step(self, n: int) -> float:
        if self.flat is not None and n > self.flat:
            return self.a + self.b * max(0.0, self.flat - self.k)
        fitted = self.a + self.b * max(0.0, n - self.k)
        if self.saturate is None or n <= self.saturate:
            return fitted
        top = self.a + self.b * max(0.0, self.saturate - self.k)
        return max(fitted, top * n / self.saturate)


@dataclass(frozen=True, slots=True)
class Load:
    """Open loop (``arrivals``) or closed loop (``clients`` with ``think``), over
    requests whose prompt and output tokens are taken in turn from ``prompt``/``output``."""

    prompt: np.ndarray
    output: np.ndarray
    arrivals: np.ndarray | None = None
    clients: int | None = None
    think: float = 0.0
    #: Closed loop: stop sending after this many requests or this many seconds.
    count: int = 1000
    duration: float | None = None
    seed: int = 0
    #: The max_tokens each request asks for: an engine that reserves KV at admission
    #: holds prompt + max_tokens (None: prompt + the answer's own length).
    max_tokens: float | None = None


@dataclass(frozen=True, slots=True)
class Simulated:
    """Each simulated request: arrival, admission, first token, end, tokens, success."""

    arrival: np.ndarray
    start: np.ndarray
    first: np.ndarray
    end: np.ndarray
    prompt: np.ndarray
    output: np.ndarray
    ok: np.ndarray


def simulate(eng: Engine, load: Load) -> Simulated:
    """Run ``load`` through ``eng``; every request sent ends (success or error)."""
    rng = np.random.default_rng(load.seed)
    cap = float("inf") if eng.slots is None else eng.slots
    budget = float("inf") if eng.kv is None else eng.kv
    arr: list[float] = []
    start: list[float] = []
    first: list[float] = []
    end: list[float] = []
    prm: list[float] = []
    out: list[float] = []
    need: list[float] = []  # KV tokens reserved at admission (reserve mode)
    ok: list[bool] = []
    arrivals: list[tuple[float, int]] = []  # (time, client or -1)
    if load.arrivals is not None:
        arrivals = [(float(t), -1) for t in np.sort(load.arrivals)]
        heapq.heapify(arrivals)
        limit = len(arrivals)
    else:
        limit = load.count
        # Clients past the count never send: a level of a million clients costs
        # what its requests cost.
        arrivals = [(0.0, c) for c in range(min(load.clients or 1, limit))]
    horizon = float("inf") if load.duration is None else load.duration
    queue: deque[int] = deque()
    prefill: list[tuple[float, int, int]] = []  # (time, request, its admission number)
    # batched prefill: the latest group's (start, end) and members, and a heap of
    # (end, group, version) where a member joining later moves the group's end
    group: list[float] = [-1.0, -1.0]
    members: list[list[tuple[int, int]]] = []
    groups: list[tuple[float, int, int]] = []
    decode: list[tuple[float, int, int]] = []  # (work at its end, request, admission)
    client_of: dict[int, int] = {}
    grow = eng.kv is not None and not eng.kv_reserve  # on-demand KV (vLLM)
    # on demand, a request is admitted with room for its next token too: one admitted
    # into a full cache would be preempted again before it made any
    spare = 1.0 if grow else 0.0
    # whole KV blocks: only where both a block size and the capacity are known
    blocked = eng.block > 1.0 and eng.kv is not None
    gen: list[int] = []  # each request's admission number: stale heap entries skip
    made: list[float] = []  # decode tokens made before the current admission
    since: dict[int, float] = {}  # decoding requests: work at their (re)start
    live: dict[int, int] = {}  # running requests: admission number
    held = 0.0  # reserved, or on demand: prompts and tokens made up to each (re)start
    admitted = 0
    running = 0
    t = 0.0
    work = 0.0
    stall = 0.0
    # batched: prompts admitted while requests decode are prefilled when the step in
    # progress ends (``gate``): (request, its admission number, prompt tokens)
    gate = math.inf
    pending: list[tuple[int, int, float]] = []
    sent = 0
    np_ = load.prompt.size

    def holding(i: int) -> float:
        return need[i] if not grow else prm[i] + made[i]

    def leave(i: int) -> None:
        nonlocal held, running
        running -= 1
        held -= holding(i)
        live.pop(i, None)
        since.pop(i, None)  # what it grew was counted from ``since``, never in ``held``

    def finish(i: int, when: float) -> None:
        leave(i)
        end[i] = when
        c = client_of.pop(i, -1)
        if c >= 0 and sent < limit and when + load.think < horizon:
            heapq.heappush(arrivals, (when + load.think, c))

    def first_token(i: int) -> None:
        if math.isnan(first[i]):  # the first time, not a recompute
            first[i] = t
        m = out[i] - 1.0 - made[i]
        if m <= 0:
            finish(i, t)
        else:
            heapq.heappush(decode, (work + m, i, gen[i]))
            if grow:
                since[i] = work

    def prefill_at(i: int, p: float) -> None:
        """Schedule request ``i``'s first token, its prompt (``p`` tokens) admitted now."""
        if not eng.batch_prefill:
            due = t + eng.e + eng.kappa * eng.step(running) + eng.c_first * p
            heapq.heappush(prefill, (due, i, gen[i]))
            return
        # the scheduler gathers what arrives during the step before the group's own
        # (requests that end in one step send again together, a prefill stall apart)
        if members and group[0] >= t - eng.a:
            group[1] += eng.c_first * p
            members[-1].append((i, gen[i]))
        else:  # a new group, after the one computing now
            group[0] = max(t, group[1])
            group[1] = group[0] + eng.kappa * eng.step(running) + eng.c_first * p
            members.append([(i, gen[i])])
        # e is each answer's own latency (not the engine's step): it holds up no one
        heapq.heappush(groups, (group[1] + eng.e, len(members) - 1, len(members[-1])))

    def step_end(d: float) -> float:
        """When the decode step in progress ends (a hair after: an answer whose last
        token it computes ends first, and its client's next prompt joins the batch)."""
        left = decode[0][0] - work
        whole = round(left)
        part = 1.0 if abs(left - whole) < 1e-6 else left - math.floor(left)
        return max(t, stall) + part * d + 1e-9

    def tokens(i: int) -> float:
        """What a running request holds now: one more token a step while it decodes."""
        return holding(i) + (work - since[i] if i in since else 0.0)

    def kv_blocks() -> tuple[int, list[float]]:
        """Blocks the running requests hold (a decoding one at its last block's end
        holds its next too: its next token needs it now), and each decoding one's room
        before it needs another."""
        used, rooms = 0, []
        for i in live:
            tok = tokens(i)
            n = math.ceil(tok / eng.block - 1e-9)
            if i in since:
                r = n * eng.block - tok
                if r < 1e-6:
                    n, r = n + 1, r + eng.block
                rooms.append(r)
            used += n
        return used, rooms

    def t_full(d: float) -> float:
        """When the decoding requests' tokens fill the KV cache (on demand)."""
        if not grow or not since or len(live) < 2:
            return float("inf")
        if not blocked:
            room = budget - held - sum(work - w for w in since.values())
            return max(t, stall) + max(0.0, room) / len(since) * d
        # whole blocks: full once the decoding requests' next blocks outnumber the free
        # ones. Each needs one when it grows past its last block's room r, then one a
        # block later: the needs come in the order of r, round after round.
        used, rooms = kv_blocks()
        free = math.floor(budget / eng.block + 1e-9) - used
        if free < 0:
            return max(t, stall)
        rooms.sort()
        rounds, nth = divmod(free, len(rooms))
        return max(t, stall) + (rooms[nth] + rounds * eng.block) * d

    def fits(i: int) -> bool:
        """Whether the queue's head may be admitted: its tokens (and, on demand, room
        for its next one) fit beside what the running requests hold."""
        if not blocked:
            grown = sum(work - w for w in since.values())
            return held + grown + holding(i) + spare <= budget
        want = math.ceil((holding(i) + spare) / eng.block - 1e-9)
        return kv_blocks()[0] + want <= math.floor(budget / eng.block + 1e-9)

    while arrivals or queue or prefill or groups or decode or pending:
        while prefill and prefill[0][2] != gen[prefill[0][1]]:
            heapq.heappop(prefill)
        while decode and decode[0][2] != gen[decode[0][1]]:
            heapq.heappop(decode)
        while groups and groups[0][2] != len(members[groups[0][1]]):
            heapq.heappop(groups)
        d = eng.step(running) if running else eng.a
        t_dec = (max(t, stall) + (decode[0][0] - work) * d) if decode else float("inf")
        t_pre = min(
            prefill[0][0] if prefill else float("inf"), groups[0][0] if groups else float("inf")
        )
        t_arr = arrivals[0][0] if arrivals else float("inf")
        t_pmt = t_full(d)
        t_next = min(t_dec, t_pre, t_arr, t_pmt, gate)
        if t_next == float("inf"):
            break  # only a queue that can never be admitted is left
        work += max(0.0, t_next - max(t, stall)) / d
        t = t_next
        if t_pmt <= t_next:
            # no block is free: the latest admitted is preempted, keeps what it made,
            # and waits at the head of the queue to recompute it
            v = max(live, key=live.__getitem__)
            grown_v = work - since[v] if v in since else 0.0
            leave(v)
            made[v] += grown_v
            gen[v] += 1
            queue.appendleft(v)
        elif t_dec <= t_next and decode:
            # every answer whose last token is in this step ends now: one admitted in
            # between would stall the step the others' last tokens are already in
            w_end = decode[0][0]
            while decode and decode[0][0] <= w_end + 1e-9:
                _, i, g = heapq.heappop(decode)
                if g == gen[i]:
                    finish(i, t)
        elif gate <= t_next:
            gate = math.inf  # the step in progress ended: its waiting prompts start
            for i, g, p in pending:
                if gen[i] == g:  # not preempted meanwhile
                    prefill_at(i, p)
                    stall = max(stall, t) + eng.c * p
            pending.clear()
        elif t_pre <= t_next:
            if prefill and prefill[0][0] <= t_next:
                first_token(heapq.heappop(prefill)[1])
            else:
                for i, g in members[heapq.heappop(groups)[1]]:
                    if gen[i] == g:  # not preempted meanwhile
                        first_token(i)
        else:
            ta, c = heapq.heappop(arrivals)
            i = len(arr)
            sent += 1
            arr.append(ta)
            prm.append(float(load.prompt[i % np_]))
            out.append(max(1.0, float(load.output[i % load.output.size])))
            need.append(prm[-1] + max(out[-1], load.max_tokens or 0.0))
            gen.append(0)
            made.append(0.0)
            start.append(float("nan"))
            first.append(float("nan"))
            end.append(float("nan"))
            good = not (eng.error_share and rng.random() < eng.error_share)
            ok.append(good)
            if c >= 0:
                client_of[i] = c
            if good:
                queue.append(i)
            else:
                end[i] = ta
                c2 = client_of.pop(i, -1)
                if c2 >= 0 and sent < limit and ta + load.think < horizon:
                    heapq.heappush(arrivals, (ta + load.think, c2))
        while decode and decode[0][2] != gen[decode[0][1]]:
            heapq.heappop(decode)
        while queue and running < cap and (running == 0 or fits(queue[0])):
            i = queue.popleft()
            running += 1
            held += holding(i)
            admitted += 1
            live[i] = admitted
            if math.isnan(start[i]):  # its first admission
                start[i] = t
            # a recompute prefills the prompt and the tokens made so far
            p = prm[i] + made[i]
            if eng.batch_prefill and decode:
                # the scheduler takes new prompts between steps, never inside one
                if gate == math.inf:
                    gate = step_end(eng.step(running))
                pending.append((i, gen[i], p))
                continue
            prefill_at(i, p)
            stall = max(stall, t) + eng.c * p
    return Simulated(
        arrival=np.asarray(arr),
        start=np.asarray(start),
        first=np.asarray(first),
        end=np.asarray(end),
        prompt=np.asarray(prm),
        output=np.asarray(out),
        ok=np.asarray(ok, dtype=bool),
    )
