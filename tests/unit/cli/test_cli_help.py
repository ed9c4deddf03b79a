"""Every command's ``--help``, printed by a real ``infersight`` process at 80 and 120
columns, checked for the conventions of ``cli/_conventions.py``.

Properties, not a frozen text: a new command or flag is held to the same rules.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import unicodedata
from functools import cache
from typing import Any

import pytest
from typer.main import get_command

from infersight.cli import app
from infersight.cli._conventions import SHORT_OPTIONS, VOCABULARY

ROOT = get_command(app)
COMMANDS: dict[str, Any] = dict(ROOT.commands)  # type: ignore[attr-defined]
WIDTHS = (80, 120)
SEP = "\x00--next--\x00"

#: Prints each command's help as `infersight CMD --help` does, in one process.
_DRIVER = f"""
import sys
from infersight.cli import app
for argv in sys.argv[1:]:
    try:
        app(argv.split(), prog_name="infersight")
    except SystemExit:
        pass
    print({SEP!r}, flush=True)
"""


@cache
def rendered(width: int) -> dict[str, str]:
    """Help text of the root and of every command, from a real process at ``width``."""
    names = ["--help", *(f"{c} --help" for c in COMMANDS)]
    env = {**os.environ, "COLUMNS": str(width), "LINES": "50", "TERM": "xterm-256color"}
    out = subprocess.run(
        [sys.executable, "-c", _DRIVER, *names],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    parts = out.split(SEP + "\n")
    return {"": parts[0], **{c: parts[i + 1] for i, c in enumerate(COMMANDS)}}


def options(cmd: str) -> list[Any]:
    return [
        p
        for p in COMMANDS[cmd].params
        if getattr(p, "param_type_name", "") == "option" and not p.hidden
    ]


def flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("cmd", sorted(COMMANDS))
def test_help_is_whole_and_plain(cmd: str, width: int) -> None:
    text = rendered(width)[cmd]
    assert text.startswith(f"Usage: infersight {cmd} "), text[:200]
    for line in text.splitlines():
        assert len(line) <= width, f"{cmd} at {width} columns: line too long: {line!r}"
    # no rich emoji (`:A:` -> 🅰), no ellipsis cut, no typer type names like <list[str]>
    symbols = {ch for ch in text if unicodedata.category(ch) == "So" or ch == "…"}
    assert not symbols, f"{cmd}: {symbols}"
    assert not re.search(r"<[a-z]+[\[>]", text), re.search(r"<[a-z]+[\[>].{0,20}", text)
    assert "{" not in text.splitlines()[0]  # typer's `{input}` usage
    assert "default: (" not in text  # click's `show_default="X"` style, one style only
    body = flat(text)
    for p in options(cmd):
        # every word of the help, in order: nothing cut, rewrapped only at spaces
        assert p.help and p.help.strip(), f"{cmd} {p.opts}: no help"
        assert flat(p.help) in body, f"{cmd} {p.opts}: help mangled or cut: {p.help!r}"
    assert flat(COMMANDS[cmd].help.split("Examples:")[0].replace("\b", "")) in body


@pytest.mark.parametrize("cmd", sorted(COMMANDS))
def test_one_example_block_that_runs_this_command(cmd: str) -> None:
    text = rendered(80)[cmd]
    assert text.count("Examples:") == 1, cmd
    # the block ends at the next heading ("Arguments:", "Options:", "Load options:"...)
    block = re.split(r"\n(?=\S)", text.split("Examples:")[1].lstrip("\n"))[0]
    examples = [ln.strip() for ln in block.splitlines() if ln.strip()]
    assert examples, cmd
    for ex in examples:
        assert ex.startswith((f"infersight {cmd}", "#")) or " | infersight " in ex, ex
    assert sum(ex.startswith("infersight") or "| infersight" in ex for ex in examples) >= 2


@pytest.mark.parametrize("cmd", sorted(COMMANDS))
def test_values_show_a_metavar_and_defaults_one_style(cmd: str) -> None:
    for p in options(cmd):
        if not p.is_flag:
            # a name for the value (N, URL, KEY:MS...) or the choices (chat|completions,
            # a version among them: llm-d:0.1)
            ok = r"[A-Z][A-Z0-9_:=,.]*|[a-z0-9_-]+(\|[a-z0-9_-]+(:[0-9.]+)?)+"
            assert re.fullmatch(ok, str(p.metavar)), (cmd, p.opts, p.metavar)
        help_text = p.help or ""
        # the one style is click's `[default: X]` (show_default="X" when the option's
        # own default is None); none of the styles people write by hand
        bad = re.search(r"\(default\b|\[default\]|\[\d[^\]]*\]|\bdefault:|\bDefault\b", help_text)
        assert bad is None, f"{cmd} {p.opts}: write the default as show_default: {help_text!r}"
        if re.search(r"\bseconds\b|\(s\)|\bin s\b", help_text):
            assert p.metavar == "DURATION", f"{cmd} {p.opts}: a time takes DURATION (500ms, 2s)"


def test_root_lists_every_command_with_its_whole_summary() -> None:
    text = flat(rendered(80)[""])
    for name, cmd in COMMANDS.items():
        summary = cmd.help.strip().splitlines()[0]
        assert f"{name} {summary}" in text, f"summary of {name} cut in `infersight --help`"


def test_one_vocabulary_across_commands() -> None:
    seen: dict[str, set[str]] = {}
    for cmd in COMMANDS:
        longs = {o for p in options(cmd) for o in p.opts if o.startswith("--")}
        for p in options(cmd):
            for o in p.opts:
                if o.startswith("--") and o in VOCABULARY:
                    assert VOCABULARY[o] in (p.help or "").lower(), f"{cmd} {o}: {p.help!r}"
            shorts = [o for o in p.opts if not o.startswith("--")]
            for s in shorts:
                assert s in SHORT_OPTIONS and SHORT_OPTIONS[s] in p.opts, (cmd, p.opts)
                seen.setdefault(s, set()).update(o for o in p.opts if o.startswith("--"))
        # a key is offered both ways wherever one is used
        assert ("--api-key-env" in longs) == ("--api-key-file" in longs), cmd
        if "--url" in longs:
            assert "--api-key-env" in longs, f"{cmd} talks to a server but takes no key"
    # a short option stands for one long option everywhere (older long aliases aside)
    assert all(SHORT_OPTIONS[s] in v for s, v in seen.items()), seen


def test_every_file_written_is_out_and_every_port_served_is_port() -> None:
    """As the README says: ``-o`` is ``--out`` and ``-p`` is ``--port``, in every
    command that writes a file or serves a port."""
    writers, servers = set(), set()
    for cmd in COMMANDS:
        for p in options(cmd):
            if "--out" in p.opts:
                assert "-o" in p.opts, cmd
                writers.add(cmd)
            if "--port" in p.opts and cmd != "bench":  # bench's is the target's (vLLM's flag)
                assert "-p" in p.opts, cmd
                servers.add(cmd)
    assert writers == {"bench", "batch", "report", "monitor", "dashboards", "tune"}
    assert servers == {"serve", "gateway", "exporter"}
