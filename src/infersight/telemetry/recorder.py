"""The recorder: polls every sampler at a fixed interval into a ring buffer, and
optionally appends every round to a JSONL file for a monitoring session.

File format (``--record FILE``): one JSON object per line. The first line is a header
``{"infersight_samples": 1, "clock": {"monotonic": m, "wall": w}}`` that anchors the
monotonic timestamps to wall time; every other line is one sample
``{"t", "name", "value", "labels"}``. :func:`read_samples` reads it back.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import IO, Any

import orjson

from infersight.core.errors import ConfigError, read_user_file
from infersight.core.records import RunResult, Sample
from infersight.telemetry.base import Sampler

__all__ = ["FILE_VERSION", "Recorder", "read_samples"]

log = logging.getLogger(__name__)

FILE_VERSION = 1
#: Default ring-buffer size in samples (about 80 minutes of a typical 1 s round).
DEFAULT_CAPACITY = 200_000

Listener = Callable[[list[Sample]], None]


class Recorder:
    """Samples every sampler each ``interval`` seconds.

    ``capacity`` bounds the in-memory ring buffer (oldest samples drop first); a
    ``record`` file receives every sample regardless. A sampler that raises or takes
    longer than the interval is logged and skipped for that round, never fatal.
    """

    def __init__(
        self,
        samplers: Sequence[Sampler],
        *,
        interval: float = 1.0,
        capacity: int = DEFAULT_CAPACITY,
        record: str | Path | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if interval <= 0:
            raise ConfigError(f"telemetry interval must be > 0 s, got {interval}")
        self.samplers = list(samplers)
        self.interval = interval
        self._buf: deque[Sample] = deque(maxlen=capacity)
        self._latest: list[Sample] = []
        self._listeners: list[Listener] = []
        self._task: asyncio.Task[None] | None = None
        self._record_path = Path(record) if record is not None else None
        self._file: IO[bytes] | None = None
        self.rounds = 0
        self.dropped = 0
        #: The pacing reads ``clock`` and waits with ``sleep``: tests pass their own pair
        #: and check the rounds against it without waiting on the wall clock.
        self._clock = clock
        self._sleep = sleep

    # -- lifecycle ----------------------------------------------------------------
    async def start(self) -> None:
        """Take the first round now, then keep sampling in the background."""
        if self._task is not None:
            return
        if self._record_path is not None and self._file is None:
            self._open_record(self._record_path)
        await self.sample_once()
        self._task = asyncio.create_task(self._run(), name="infersight-recorder")

    async def stop(self) -> None:
        """Stop sampling, flush the file and close the samplers."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._file is not None:
            self._file.close()
            self._file = None
        for s in self.samplers:
            try:
                await s.close()
            except Exception as e:
                log.debug("closing sampler %s: %s", s.name, e)

    async def __aenter__(self) -> Recorder:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    # -- sampling -----------------------------------------------------------------
    async def _run(self) -> None:
        next_t = self._clock() + self.interval
        while True:
            await self._sleep(max(0.0, next_t - self._clock()))
            await self.sample_once()
            next_t += self.interval
            now = self._clock()
            if next_t < now:  # a slow round: skip ahead instead of bursting
                self.dropped += int((now - next_t) // self.interval) + 1
                next_t = now + self.interval

    async def _one(self, s: Sampler) -> list[Sample]:
        try:
            # A safety net only: samplers have their own, shorter timeouts.
            return await asyncio.wait_for(s.sample(), timeout=max(2 * self.interval, 5.0))
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.warning("sampler %s failed: %s: %s", s.name, type(e).__name__, e)
            return []

    async def sample_once(self) -> list[Sample]:
        """Take one round from every sampler now and store it."""
        results = await asyncio.gather(*(self._one(s) for s in self.samplers))
        round_: list[Sample] = [x for r in results for x in r]
        self._buf.extend(round_)
        self._latest = round_
        self.rounds += 1
        if self._file is not None:
            self._write(round_)
        for fn in list(self._listeners):
            try:
                fn(round_)
            except Exception as e:
                log.warning("telemetry listener failed: %s", e)
        return round_

    # -- access -------------------------------------------------------------------
    def add_listener(self, fn: Listener) -> None:
        """Call ``fn(samples_of_the_round)`` after every round."""
        self._listeners.append(fn)

    def samples(self) -> list[Sample]:
        """Every sample still in the ring buffer, oldest first."""
        return list(self._buf)

    def latest(self) -> list[Sample]:
        """The samples of the most recent round."""
        return list(self._latest)

    def write_to(self, result: RunResult) -> RunResult:
        """Append the buffered samples to ``result.samples`` and return it."""
        result.samples.extend(self._buf)
        return result

    # -- file ---------------------------------------------------------------------
    def _open_record(self, path: Path) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._file = path.open("wb")
        except OSError as e:
            raise ConfigError(f"cannot write {path}: {e.strerror}") from None
        header = {
            "infersight_samples": FILE_VERSION,
            "clock": {"monotonic": time.monotonic(), "wall": time.time()},
            "interval": self.interval,
        }
        self._file.write(orjson.dumps(header) + b"\n")

    def _write(self, samples: Iterable[Sample]) -> None:
        assert self._file is not None
        data = b"".join(orjson.dumps(s.to_dict()) + b"\n" for s in samples)
        try:
            self._file.write(data)
            self._file.flush()
        except OSError as e:
            log.error("stopped recording to %s: %s", self._record_path, e.strerror)
            self._file.close()
            self._file = None


def read_samples(path: str | Path) -> tuple[list[Sample], dict[str, Any]]:
    """Read a recorded JSONL file: (samples, header). A truncated last line (the
    writer was killed mid-write) is ignored; any other bad line is a ConfigError."""
    p = Path(path)
    lines = read_user_file(p).splitlines()
    if not lines:
        raise ConfigError(f"{p}: empty file, not an infersight samples recording")
    try:
        header = orjson.loads(lines[0])
    except orjson.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or "infersight_samples" not in header:
        raise ConfigError(f"{p}: not an infersight samples recording (no header line)")
    if int(header["infersight_samples"]) > FILE_VERSION:
        raise ConfigError(f"{p}: recording format is newer than this infersight; upgrade")
    out: list[Sample] = []
    for i, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            d = orjson.loads(line)
            out.append(Sample(float(d["t"]), str(d["name"]), d["value"], dict(d["labels"])))
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            if i == len(lines):
                break  # truncated final line
            raise ConfigError(f"{p}:{i}: not a valid sample line") from None
    return out, header
