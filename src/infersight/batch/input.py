"""Reading and validating a batch input file.

Two line forms are accepted, and they may be mixed in one file:

* **OpenAI Batch API** lines: ``{"custom_id": str, "method": "POST", "url":
  "/v1/chat/completions" | "/v1/completions" | "/v1/embeddings", "body": {...}}``.
* **Plain** lines: a JSON string (one prompt), a JSON list of chat messages, an object
  with ``"prompt"`` or ``"messages"`` (and no ``custom_id``), or any text that is not
  JSON (the whole line is the prompt). Plain rows go to ``/v1/chat/completions`` and
  get the id ``line-N`` (N = the 1-based line number), so a rerun on the same file
  finds the same ids.

Blank lines are ignored. The file is read twice: :func:`scan_input` validates every
line before anything is sent (holding only the ids in memory, so a file of millions
of rows fits), then :func:`iter_rows` streams the valid rows for sending.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from infersight.core.errors import ConfigError, InvalidRequest, file_error
from infersight.core.request_checks import check_body, check_messages

__all__ = [
    "ENDPOINTS",
    "BadInput",
    "BadLine",
    "BatchRow",
    "InputScan",
    "RowDefaults",
    "iter_rows",
    "parse_line",
    "scan_input",
]

#: Endpoints a batch row may target.
ENDPOINTS = ("/v1/chat/completions", "/v1/completions", "/v1/embeddings")
_ENDPOINT_NAMES = dict(zip(ENDPOINTS, ("chat", "completions", "embeddings"), strict=True))
_MAX_ID_LEN = 512


@dataclass(slots=True)
class BadLine:
    """One invalid input line: its 1-based number and why it was rejected."""

    line: int
    reason: str
    #: The id of this line's error line in the output (see :func:`scan_input`).
    custom_id: str = ""

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


class BadInput(ConfigError):
    """The input has invalid lines (and ``--on-bad-line stop`` is in force)."""

    def __init__(self, path: Path, bad: list[BadLine]) -> None:
        shown = "; ".join(str(b) for b in bad[:3])
        more = f"; and {len(bad) - 3} more" if len(bad) > 3 else ""
        super().__init__(
            f"{path}: {len(bad)} bad line{'s' if len(bad) != 1 else ''} ({shown}{more}); "
            "fix them or pass --on-bad-line skip"
        )
        self.bad_lines = bad


@dataclass(frozen=True, slots=True)
class RowDefaults:
    """Fields filled into a row's body when the line does not set them."""

    model: str | None = None
    max_tokens: int | None = None


@dataclass(slots=True)
class BatchRow:
    """One valid request of the batch."""

    custom_id: str
    url: str
    body: dict[str, Any]
    line: int
    #: Rough size of the prompt in characters, for the cost projection.
    prompt_chars: int = 0


@dataclass(slots=True)
class InputScan:
    """The result of validating a whole input file."""

    path: Path
    rows: int = 0
    bad: list[BadLine] = field(default_factory=list)
    #: Distinct models the rows name (None = a row relies on the default model).
    models: set[str | None] = field(default_factory=set)
    ids: set[str] = field(default_factory=set)

    @property
    def bad_line_numbers(self) -> set[int]:
        return {b.line for b in self.bad}

    @property
    def bad_ids(self) -> set[str]:
        """The ids of the bad lines' error lines in the output."""
        return {b.custom_id for b in self.bad}


def _messages_error(messages: Any) -> str | None:
    try:
        check_messages(messages)
    except InvalidRequest as e:
        return e.message
    for i, m in enumerate(messages):
        # A batch row is a whole request: each message says something (or calls a tool).
        if "content" not in m and "tool_calls" not in m:
            return f"messages[{i}] has no 'content'"
    return None


def _body_error(url: str, body: dict[str, Any]) -> str | None:
    """Why a row's body cannot be sent: the checks the gateway and ``serve`` apply
    (:mod:`infersight.core.request_checks`), and a batch's own rules."""
    if body.get("stream"):
        return "body.stream is not allowed in a batch (each result is written whole)"
    if url == "/v1/chat/completions":
        err = _messages_error(body.get("messages"))
        if err:
            return err
    try:
        check_body(_ENDPOINT_NAMES[url], body)
    except InvalidRequest as e:
        return e.message
    for name in ("max_tokens", "max_completion_tokens"):
        if body.get(name) == 0:  # a row that asks for nothing would bill a prompt for nothing
            return f"body.{name} must be a positive integer"
    return None


def _prompt_chars(body: dict[str, Any]) -> int:
    src = body.get("messages") or body.get("prompt") or body.get("input") or ""
    return len(orjson.dumps(src)) if not isinstance(src, str) else len(src)


def _fill(body: dict[str, Any], defaults: RowDefaults, url: str) -> dict[str, Any]:
    if defaults.model is not None and not body.get("model"):
        body["model"] = defaults.model
    if (
        defaults.max_tokens is not None
        and url != "/v1/embeddings"
        and "max_tokens" not in body
        and "max_completion_tokens" not in body
    ):
        body["max_tokens"] = defaults.max_tokens
    return body


def parse_line(raw: bytes, line_no: int, defaults: RowDefaults | None = None) -> BatchRow | None:
    """Parse one input line into a row; ``None`` for a blank line.

    Raises :class:`ConfigError` with the reason when the line is invalid.
    """
    d = defaults or RowDefaults()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ConfigError("not valid UTF-8") from None
    text = text.strip()
    if not text:
        return None
    try:
        doc: Any = orjson.loads(text)
    except orjson.JSONDecodeError:
        if text[0] in "{[":
            raise ConfigError("looks like JSON but does not parse") from None
        doc = text  # plain text line: the whole line is the prompt
    plain_id = f"line-{line_no}"
    if isinstance(doc, str):
        if not doc.strip():
            raise ConfigError("empty prompt")
        body: dict[str, Any] = {"messages": [{"role": "user", "content": doc}]}
        return _row(plain_id, "/v1/chat/completions", body, line_no, d)
    if isinstance(doc, list):
        err = _messages_error(doc)
        if err:
            raise ConfigError(f"a plain line that is a list must be chat messages: {err}")
        return _row(plain_id, "/v1/chat/completions", {"messages": doc}, line_no, d)
    if not isinstance(doc, dict):
        raise ConfigError("expected a JSON object, a prompt string or a list of messages")
    if "custom_id" not in doc and "body" not in doc:
        if "messages" in doc or "prompt" in doc:
            body = dict(doc)
            url = "/v1/chat/completions" if "messages" in body else "/v1/completions"
            return _row(plain_id, url, body, line_no, d)
        raise ConfigError("object has neither 'custom_id' (OpenAI batch) nor 'messages'/'prompt'")
    cid = doc.get("custom_id")
    if not isinstance(cid, str) or not cid.strip():
        raise ConfigError("'custom_id' must be a non-empty string")
    if len(cid) > _MAX_ID_LEN:
        raise ConfigError(f"'custom_id' longer than {_MAX_ID_LEN} characters")
    method = doc.get("method", "POST")
    if not isinstance(method, str) or method.upper() != "POST":
        raise ConfigError(f"method {method!r} is not supported (only POST)")
    target = doc.get("url")
    if not isinstance(target, str) or target not in ENDPOINTS:
        raise ConfigError(f"url {target!r} is not one of {', '.join(ENDPOINTS)}")
    payload = doc.get("body")
    if not isinstance(payload, dict):
        raise ConfigError("'body' must be a JSON object")
    return _row(cid, target, dict(payload), line_no, d)


def _row(cid: str, url: str, body: dict[str, Any], line_no: int, d: RowDefaults) -> BatchRow:
    err = _body_error(url, body)
    if err:
        raise ConfigError(err)
    body = _fill(body, d, url)
    return BatchRow(cid, url, body, line_no, _prompt_chars(body))


def _open_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    try:
        f = path.open("rb")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such input file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a JSONL file") from None
    except OSError as e:
        raise file_error(path, e) from None
    with f:
        yield from enumerate(f, start=1)


def scan_input(path: str | Path, defaults: RowDefaults | None = None) -> InputScan:
    """Validate every line; collect bad lines (duplicate ids included) and row ids."""
    p = Path(path)
    scan = InputScan(path=p)
    first_seen: dict[str, int] = {}
    for n, raw in _open_lines(p):
        try:
            row = parse_line(raw, n, defaults)
        except ConfigError as e:
            scan.bad.append(BadLine(n, str(e)))
            continue
        if row is None:
            continue
        if row.custom_id in first_seen:
            scan.bad.append(
                BadLine(
                    n, f"custom_id {row.custom_id!r} duplicates line {first_seen[row.custom_id]}"
                )
            )
            continue
        first_seen[row.custom_id] = n
        scan.rows += 1
        scan.models.add(row.body.get("model"))
    scan.ids = set(first_seen)
    _name_bad_lines(p, scan)
    return scan


def _own_id(raw: bytes) -> str | None:
    """The custom_id an invalid line names, if it names a usable one."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    cid = doc.get("custom_id") if isinstance(doc, dict) else None
    ok = isinstance(cid, str) and cid.strip() and len(cid) <= _MAX_ID_LEN
    return cid if ok else None


def _name_bad_lines(path: Path, scan: InputScan) -> None:
    """Give each bad line the id its error line carries in the output: the line's own
    custom_id when it has a usable one that no valid row or earlier bad line holds
    (a duplicate's id belongs to the valid row), else ``line-N`` as for a plain row."""
    if not scan.bad:
        return
    by_line = {b.line: b for b in scan.bad}
    taken = set(scan.ids)
    for n, raw in _open_lines(path):
        bad = by_line.get(n)
        if bad is None:
            continue
        for cid in (_own_id(raw), f"line-{n}", f"line-{n}-invalid"):
            if cid is not None and cid not in taken:
                bad.custom_id = cid
                taken.add(cid)
                break


def iter_rows(
    path: str | Path,
    *,
    skip_lines: set[int] | None = None,
    defaults: RowDefaults | None = None,
) -> Iterator[BatchRow]:
    """Stream the valid rows of a file that :func:`scan_input` has checked."""
    skip = skip_lines or set()
    for n, raw in _open_lines(Path(path)):
        if n in skip:
            continue
        try:
            row = parse_line(raw, n, defaults)
        except ConfigError:
            continue  # the scan reported it; the file changed under us otherwise
        if row is not None:
            yield row
