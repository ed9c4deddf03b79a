"""How llama.cpp's compute threads are counted and how they wait for each other.

The xllamacpp wheel's CPU backend is built with OpenMP (``OPENMP = 1`` in its system
info) and linked to GCC's libgomp. Its compute threads meet at a barrier after every
operation of the graph: a few hundred times per decoded token, tens of microseconds
apart for a small model. How a thread waits there decides the speed:

- spinning (``OMP_WAIT_POLICY=ACTIVE``, or libgomp's default of 300,000 turns, which is
  about 25 ms on a CPU whose ``pause`` takes 85 ns) answers a barrier at once, but when
  another process holds the core a peer needs, the spinner burns its own time slice
  waiting for a thread that cannot run: decode collapses on a shared machine;
- sleeping at once (``PASSIVE``) costs a futex wake-up per barrier: a single stream
  is much slower on a quiet machine (``benchmarks/engine_scaling.py`` measures it).

The default here spins a short, bounded while (``GOMP_SPINCOUNT``, :data:`SPIN_COUNT`
turns, a fraction of a millisecond) and then sleeps: a barrier inside a decode step is
answered while still spinning, and a thread whose peer was preempted gives its core
back almost at once. llama.cpp's own ``--poll`` / ``--cpu-mask`` settings belong to its
non-OpenMP thread pool and do nothing in this build.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

import psutil

from infersight.core.errors import ConfigError

__all__ = [
    "INFINITE_SPIN",
    "SPIN_COUNT",
    "default_threads",
    "describe_wait",
    "parse_spin_count",
    "resolve_wait",
    "wait_env",
]

#: Barrier spin (libgomp turns of ``pause``) before a waiting thread sleeps.
SPIN_COUNT = 1000
#: libgomp's spin count for ``OMP_WAIT_POLICY=ACTIVE`` (and ``GOMP_SPINCOUNT=INFINITE``).
INFINITE_SPIN = 30_000_000_000
_POLICIES = ("AUTO", "ACTIVE", "PASSIVE")
_SPIN_RE = re.compile(r"^\s*(\d+)\s*([kMGT]?)\s*$")
_SUFFIX = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}


def default_threads() -> int:
    """Physical cores this process may run on (hyper-threads slow llama.cpp down)."""
    try:
        allowed = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        allowed = os.cpu_count() or 1
    physical: int | None = None
    try:
        physical = psutil.cpu_count(logical=False)
    except Exception:  # psutil may not know the topology (containers)
        physical = None
    return max(1, min(allowed, physical or allowed))


def parse_spin_count(text: str) -> int:
    """A ``GOMP_SPINCOUNT`` value as libgomp reads it: a whole number with an optional
    k/M/G/T multiplier, or ``INFINITE``/``INFINITY``. Raises ConfigError otherwise."""
    if text.strip().upper() in ("INFINITE", "INFINITY"):
        return INFINITE_SPIN
    m = _SPIN_RE.match(text)
    if not m:
        raise ConfigError(
            f"GOMP_SPINCOUNT must be a whole number (optionally with k, M, G or T) or "
            f"INFINITE, got {text!r}"
        )
    return min(int(m.group(1)) * _SUFFIX[m.group(2)], INFINITE_SPIN)


@dataclass(frozen=True, slots=True)
class WaitPolicy:
    """How compute threads wait at a barrier: ``policy`` (AUTO, ACTIVE or PASSIVE),
    the spin count sent as ``GOMP_SPINCOUNT`` (None: the policy's own), and where the
    choice came from (``default``, ``argument`` or the environment variable)."""

    policy: str
    spin_count: int | None
    source: str


def resolve_wait(
    policy: str | None = None,
    spin_count: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> WaitPolicy:
    """Arguments win, then the caller's ``OMP_WAIT_POLICY`` / ``GOMP_SPINCOUNT``, then
    the default (AUTO: spin :data:`SPIN_COUNT` turns, then sleep)."""
    env = os.environ if environ is None else environ
    sources = []
    if policy is not None:
        sources.append("argument")
    elif env.get("OMP_WAIT_POLICY"):
        policy = env["OMP_WAIT_POLICY"]
        sources.append("$OMP_WAIT_POLICY")
    chosen = (policy or "AUTO").strip().upper()
    if chosen not in _POLICIES:
        raise ConfigError(f"OMP_WAIT_POLICY must be ACTIVE or PASSIVE, got {policy!r}")
    if spin_count is not None:
        if isinstance(spin_count, bool) or not isinstance(spin_count, int) or spin_count < 0:
            raise ConfigError(f"the spin count must be a whole number >= 0, got {spin_count!r}")
        sources.append("argument")
    elif env.get("GOMP_SPINCOUNT"):
        spin_count = parse_spin_count(env["GOMP_SPINCOUNT"])
        sources.append("$GOMP_SPINCOUNT")
    elif chosen == "AUTO":
        spin_count = SPIN_COUNT
    source = " and ".join(dict.fromkeys(sources)) or "default"
    return WaitPolicy(policy=chosen, spin_count=spin_count, source=source)


def wait_env(policy: str, spin_count: int | None) -> dict[str, str | None]:
    """The engine process's OpenMP variables (None: removed from its environment)."""
    return {
        "OMP_WAIT_POLICY": None if policy == "AUTO" else policy,
        "GOMP_SPINCOUNT": None if spin_count is None else str(spin_count),
    }


def describe_wait(policy: str, spin_count: int | None) -> str:
    """One line for the start-up banner: how waiting threads behave."""
    if spin_count is None:
        spin_count = {"ACTIVE": INFINITE_SPIN, "PASSIVE": 0}.get(policy, 300_000)
    if spin_count >= INFINITE_SPIN:
        return "waiting threads spin (fastest on an idle machine; collapses on a busy one)"
    if spin_count == 0:
        return "waiting threads sleep at once (safe on a busy machine; slower on an idle one)"
    return f"waiting threads spin {spin_count} turns, then sleep"
