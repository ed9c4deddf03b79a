"""One batch run per output file at a time."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from infersight.core.errors import ConfigError

__all__ = ["OutputLock"]


class OutputLock:
    """An exclusive ``flock`` on the output file: one batch run per output at a time.

    Two runs appending to one file would each repair the other's "torn" line and send
    the same rows. The lock dies with the process (a SIGKILL frees it). Compaction
    replaces the file, so :meth:`relock` moves the lock to the new one.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None
        self.relock()

    def relock(self) -> None:
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX: no lock
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise ConfigError(f"{self.path}: cannot open the output file ({e.strerror})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise ConfigError(
                f"{self.path}: another infersight batch is writing this file; "
                "wait for it or pick another --out"
            ) from None
        self.release()
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)  # closing the descriptor drops the flock
            self._fd = None
