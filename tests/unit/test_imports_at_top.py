"""Imports sit at the top of each module, so go-to-definition and the reader find them.

An import inside a function is allowed in two cases only: a CLI command module, where
the command's own packages would slow every ``infersight --help`` (each such module has
a comment with the measured cost), and a library that is optional, platform-specific or
costly to import for the few calls that need it (:data:`LAZY_LIBRARIES`).
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import infersight
import infersight_testkit

ROOT = Path(infersight.__file__).parent
#: The test kit beside the package keeps the same rule.
KIT = Path(infersight_testkit.__file__).parent

#: Imported inside the functions that need them: optional extras (ray, redis), POSIX or
#: non-Windows modules (termios, tty, fcntl, uvloop), a native library whose failing load
#: the engine's child reports as one line (xllamacpp), nvidia-ml-py (absent means no
#: NVML backend), and libraries whose import costs more than their few callers use
#: (scipy, numpy in stats.validity, llm-d's report models).
LAZY_LIBRARIES = {
    "fcntl",
    "llmd_benchmark_report",
    "numpy",
    "pynvml",
    "ray",
    "redis",
    "scipy",
    "termios",
    "tty",
    "uvloop",
    "xllamacpp",
    "infersight.report.llmd.v01",
    "infersight.report.llmd.v02",
}

#: A comment giving a measured cost: "# ... ~1.8 s ...".
COST = re.compile(r"^# .*~\d[\d.-]* s\b", re.M)

#: What ``infersight --help`` must not load (rich would add ~20 ms, the others 0.2 s or more).
NOT_AT_START = (
    "infersight.entrypoints",
    "aiohttp",
    "scipy",
    "ray",
    "llmd_benchmark_report",
    "rich",
)


def _function_imports(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, module) of every import whose innermost scope is a function."""
    out: list[tuple[int, str]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom) and in_function:
                names = [a.name for a in child.names] if isinstance(child, ast.Import) else []
                module = child.module if isinstance(child, ast.ImportFrom) else None
                out.extend((child.lineno, m) for m in ([module] if module else names))
            inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.ClassDef):
                inner = False
            visit(child, inner)

    visit(tree, False)
    return out


def _allowed(module: str) -> bool:
    return any(module == lib or module.startswith(f"{lib}.") for lib in LAZY_LIBRARIES)


def test_the_reader_finds_imports_in_functions() -> None:
    tree = ast.parse("import a\ndef f():\n    import b\n    class C:\n        import c\n")
    assert _function_imports(tree) == [(3, "b")]


def test_imports_inside_functions_are_only_the_allowed_ones() -> None:
    bad = []
    for path in [*sorted(ROOT.rglob("*.py")), *sorted(KIT.rglob("*.py"))]:
        rel = path.relative_to(ROOT if path.is_relative_to(ROOT) else KIT.parent)
        if rel.parts[0] == "cli":
            continue
        for line, module in _function_imports(ast.parse(path.read_text())):
            if not _allowed(module):
                bad.append(f"{rel}:{line} {module}")
    assert bad == [], "move these imports to the top of their module"


def test_cli_modules_with_imports_inside_say_what_they_cost() -> None:
    silent = []
    for path in sorted((ROOT / "cli").glob("*.py")):
        text = path.read_text()
        if _function_imports(ast.parse(text)) and not COST.search(text):
            silent.append(path.name)
    assert silent == []


def test_help_loads_none_of_the_command_packages() -> None:
    code = (
        "import sys, infersight.cli; "
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {NOT_AT_START!r} "
        f"or m.startswith('infersight.entrypoints')))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"
