"""How a run stopped by a signal says so, the same in every command and file."""

from __future__ import annotations

import signal

__all__ = ["stop_text"]


def stop_text(sig: int | None) -> str:
    """``interrupted (Ctrl-C)`` for SIGINT, ``terminated (SIGTERM)`` for SIGTERM, else
    ``stopped (SIGNAME)``; a stop by no signal (a caller's request) is ``stopped``."""
    if sig is None:
        return "stopped"
    if sig == signal.SIGINT:
        return "interrupted (Ctrl-C)"
    try:
        name = signal.Signals(sig).name
    except ValueError:
        name = f"signal {sig}"
    return f"terminated ({name})" if sig == signal.SIGTERM else f"stopped ({name})"
