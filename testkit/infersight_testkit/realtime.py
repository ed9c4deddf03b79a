"""Real-time scheduling for timing-critical test and benchmark processes."""

from __future__ import annotations

import os

__all__ = ["realtime"]


def realtime(pid: int) -> bool:
    """Put ``pid`` (0: this thread) under SCHED_FIFO when allowed (root or CAP_SYS_NICE).

    On a shared, loaded machine other processes' CPU load delays every wake-up of a
    server and its client by milliseconds; under SCHED_FIFO the kernel wakes them first.
    Callers only sleep and stream for a few seconds, and the kernel's real-time
    throttling still keeps 5% of the CPU for everyone else. Returns whether it took
    effect; without the privilege the caller runs as it is.
    """
    try:
        os.sched_setscheduler(pid, os.SCHED_FIFO, os.sched_param(10))
    except (OSError, AttributeError):
        return False
    return True
