"""The batch output file: OpenAI Batch output lines, durable, resumable.

Each line is ``{"id", "custom_id", "response": {"status_code", "request_id", "body"} |
null, "error": null | {"code", "message"}}``. ``error.code`` is the typed error kind
(``RateLimited``, ``BadRequest``, ``ReadError``...). A failed row keeps the server's
status and body in ``response`` when there was an HTTP answer.

**Durability.** :class:`OutputWriter` appends whole lines with one ``write`` per batch
and ``fsync``s the file after each batch, so the output file itself is the
checkpoint: a row whose line is in the file is never sent again by a rerun.

**Crash repair.** A crash can leave a torn last line (no newline, or bad JSON); it is
cut off on load and that row is simply run again.

**Last wins.** ``--retry-failed`` appends the new results of failed rows. While it
runs a custom_id can appear twice; the reader and the summary take the *last* line of
each id. When the run ends (normally or by Ctrl-C), and on the next load, the file is
compacted atomically (temp file, fsync, rename) so that each custom_id appears
exactly once again.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from infersight.core.errors import ConfigError, InfersightError, StatusError, file_error

__all__ = [
    "OutputState",
    "OutputWriter",
    "compact_output",
    "error_line",
    "load_output",
    "read_output",
    "result_line",
]


#: ``error.code`` of a skipped input line: DataError now, ConfigError in older files.
INPUT_ERROR_CODES = ("DataError", "ConfigError")


def result_line(
    custom_id: str,
    *,
    status: int | None,
    body: Any,
    request_id: str | None = None,
    error_code: str | None = None,
    error_message: str | None = None,
) -> bytes:
    """One OpenAI Batch output line, newline included."""
    response = None
    if status is not None:
        response = {"status_code": status, "request_id": request_id or "", "body": body}
    error = None if error_code is None else {"code": error_code, "message": error_message or ""}
    doc = {
        "id": f"batch_req_{secrets.token_hex(12)}",
        "custom_id": custom_id,
        "response": response,
        "error": error,
    }
    return orjson.dumps(doc) + b"\n"


def error_line(custom_id: str, e: InfersightError, request_id: str | None = None) -> bytes:
    """The output line of a row that failed with ``e``: the server's answer when it
    gave one (its JSON error body, or the text wrapped as one), and the typed error.
    ``request_id`` (the id the request was sent with) stands in for a server that
    names none."""
    status = body = rid = None
    if isinstance(e, StatusError):
        status, rid = e.status or None, e.request_id or request_id
        if status is not None and e.body:
            try:
                body = orjson.loads(e.body)
            except orjson.JSONDecodeError:
                body = {"error": {"message": e.body}}
    return result_line(
        custom_id, status=status, body=body, request_id=rid, error_code=e.kind, error_message=str(e)
    )


@dataclass
class OutputState:
    """What an existing output file already holds (last line of each id wins)."""

    path: Path
    #: custom_id -> True (succeeded) / False (failed), last line wins.
    done: dict[str, bool] = field(default_factory=dict)
    lines: int = 0
    duplicates: int = 0
    #: Bytes of a torn final line that were cut off (0 = none).
    repaired_bytes: int = 0
    #: model -> [prompt_tokens, completion_tokens] over succeeded rows.
    usage: dict[str, list[int]] = field(default_factory=dict)
    #: Ids whose line records an invalid input line (never sent): error kind DataError,
    #: or ConfigError in files written before docs/design.md section 7 said DataError.
    input_errors: set[str] = field(default_factory=set)

    @property
    def ok_ids(self) -> set[str]:
        return {k for k, v in self.done.items() if v}

    @property
    def failed_ids(self) -> set[str]:
        return {k for k, v in self.done.items() if not v}


def _parse(line: bytes, n: int, path: Path) -> dict[str, Any]:
    try:
        doc = orjson.loads(line)
    except orjson.JSONDecodeError:
        raise ConfigError(
            f"{path} line {n} is not valid JSON: not a batch output file? "
            "move it away or pick another --out"
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("custom_id"), str):
        raise ConfigError(f"{path} line {n} has no custom_id: not a batch output file?")
    return doc


def _line_ok(doc: dict[str, Any]) -> bool:
    resp = doc.get("response")
    return doc.get("error") is None and isinstance(resp, dict) and resp.get("status_code") == 200


def _repair_tail(path: Path, data: bytes, repair: bool) -> tuple[bytes, int]:
    """Cut a torn final line (no trailing newline) off ``data`` and, if asked, the file."""
    if not data or data.endswith(b"\n"):
        return data, 0
    keep = data.rfind(b"\n") + 1
    torn = len(data) - keep
    if repair:
        with path.open("r+b") as f:
            f.truncate(keep)
            f.flush()
            os.fsync(f.fileno())
    return data[:keep], torn


def load_output(path: str | Path, *, repair: bool = True) -> OutputState:
    """Read an output file (missing = empty), repairing a torn final line."""
    p = Path(path)
    state = OutputState(path=p)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        return state
    except IsADirectoryError:
        raise ConfigError(f"{p}: is a directory; --out needs a file path") from None
    except OSError as e:
        raise file_error(p, e, "output file") from None
    data, state.repaired_bytes = _repair_tail(p, data, repair)
    last: dict[str, dict[str, Any]] = {}
    for n, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        doc = _parse(line, n, p)
        state.lines += 1
        if doc["custom_id"] in last:
            state.duplicates += 1
        last[doc["custom_id"]] = doc
    for cid, doc in last.items():
        ok = _line_ok(doc)
        state.done[cid] = ok
        err = doc.get("error")
        if isinstance(err, dict) and err.get("code") in INPUT_ERROR_CODES:
            state.input_errors.add(cid)
        if ok:
            body = doc["response"].get("body") or {}
            usage = body.get("usage") if isinstance(body, dict) else None
            if isinstance(usage, dict):
                model = str(body.get("model") or "")
                acc = state.usage.setdefault(model, [0, 0])
                acc[0] += int(usage.get("prompt_tokens") or 0)
                acc[1] += int(usage.get("completion_tokens") or 0)
    return state


def read_output(path: str | Path) -> dict[str, dict[str, Any]]:
    """custom_id -> its output line (last line wins); the file is not modified."""
    p = Path(path)
    data, _ = _repair_tail(p, p.read_bytes(), repair=False)
    out: dict[str, dict[str, Any]] = {}
    for n, line in enumerate(data.splitlines(), start=1):
        if line.strip():
            doc = _parse(line, n, p)
            out[doc["custom_id"]] = doc
    return out


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):  # some filesystems cannot fsync a directory
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def compact_output(path: str | Path) -> int:
    """Rewrite the file atomically so each custom_id appears once (its last line).

    Returns the number of lines dropped. Order: a row keeps the position of its last
    line. Streaming in two passes, so the whole file is never held in memory.
    """
    p = Path(path)
    if not p.exists():
        return 0
    last: dict[str, int] = {}
    with p.open("rb") as f:
        for n, line in enumerate(f):
            if line.strip():
                last[_parse(line, n + 1, p)["custom_id"]] = n
    total = sum(1 for _ in p.open("rb"))
    dropped = total - len(last)
    if dropped <= 0:
        return 0
    tmp = p.with_name(p.name + ".compact.tmp")
    with p.open("rb") as src, tmp.open("wb") as dst:
        for n, line in enumerate(src):
            if line.strip() and last.get(_parse(line, n + 1, p)["custom_id"]) == n:
                dst.write(line)
        dst.flush()
        os.fsync(dst.fileno())
    tmp.replace(p)
    _fsync_dir(p)
    return dropped


class OutputWriter:
    """Appends result lines; each flush is one write plus fsync (the checkpoint)."""

    def __init__(self, path: str | Path, *, fsync: bool = True, max_rows: int = 64) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self.max_rows = max_rows
        self._buf: list[bytes] = []
        self._lock = asyncio.Lock()
        created = not self.path.exists()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as e:
            raise ConfigError(f"{self.path}: cannot write the output file ({e.strerror})") from None
        if created:
            _fsync_dir(self.path)

    @property
    def pending(self) -> int:
        return len(self._buf)

    def add(self, line: bytes) -> None:
        self._buf.append(line)

    def _write(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self._fd, view)
            view = view[n:]
        if self.fsync:
            os.fsync(self._fd)

    async def flush(self) -> int:
        """Write and fsync everything buffered; returns the number of rows written."""
        async with self._lock:
            if not self._buf:
                return 0
            batch, self._buf = self._buf, []
            # fsync can take tens of ms; keep it off the event loop. Shielded: if the
            # caller is cancelled the write still completes before the lock is free,
            # so close() never races a write in flight.
            fut = asyncio.get_running_loop().run_in_executor(None, self._write, b"".join(batch))
            try:
                await asyncio.shield(fut)
            except asyncio.CancelledError:
                await asyncio.wait({fut})
                raise
            return len(batch)

    def flush_sync(self) -> None:
        """Last-resort flush when the loop is going away (still whole lines)."""
        if self._buf:
            batch, self._buf = self._buf, []
            self._write(b"".join(batch))

    def close(self) -> None:
        self.flush_sync()
        with contextlib.suppress(OSError):
            os.close(self._fd)
