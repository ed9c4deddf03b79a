"""A run's Ctrl-C (and SIGTERM) state, shared by the run, its levels and its result."""

from __future__ import annotations

__all__ = ["Stop"]


class Stop:
    """Ctrl-C state: the first press stops scheduling, the second skips the grace."""

    def __init__(self) -> None:
        self.stop = False
        self.hard = False
        #: The level that was running when the run stopped (for the note).
        self.during: str | None = None
        #: The signal that stopped the run (SIGINT, SIGTERM), for the note.
        self.signal: int | None = None

    def press(self, sig: int | None = None) -> None:
        if self.stop:
            self.hard = True
        self.stop = True
        self.signal = self.signal or sig
