"""Product code uses aiohttp and redis-py through their public API only.

A private name of either library (``site._server``, ``session._retry_connection``, a
``from aiohttp.web_protocol import _ErrInfo``) can change in any release without
notice; the product would then break on an upgrade, silently. Everything is read with
``ast`` (nothing is executed):

- the private names each library defines are collected from its own source: names with
  one leading underscore that its classes assign on ``self``, define in their bodies or
  list in ``__slots__``, and its modules define at the top level;
- in ``src/``, an import of a private module or name from either library, an attribute
  of that set read or written on an object (``x._name``), or passed to
  ``getattr``/``setattr``/``hasattr`` as a literal, fails, unless infersight defines the
  name itself on its own classes. An object made by either library
  (``site = web.TCPSite(...)``) is checked whatever names infersight defines; inside a
  class that derives from one of the libraries' classes, no private name is used on
  ``self`` at all (it may be, or become, the library's own).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import aiohttp
import pytest
import redis

import infersight

SRC = Path(infersight.__file__).parent
LIBS = {"aiohttp": Path(aiohttp.__file__).parent, "redis": Path(redis.__file__).parent}


_REFLECTION = ("getattr", "setattr", "hasattr", "delattr")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined(root: Path) -> set[str]:
    """Private names the modules under ``root`` define (see the module doc)."""
    out: set[str] = set()
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and (isinstance(node.value, ast.Name) and node.value.id == "self")
            ):
                out.add(node.attr)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                out.add(node.name)
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        out.add(t.id)
                        if t.id == "__slots__" and node.value is not None:
                            out.update(
                                c.value
                                for c in ast.walk(node.value)
                                if isinstance(c, ast.Constant) and isinstance(c.value, str)
                            )
    return {n for n in out if _private(n)}


@cache
def library_private() -> frozenset[str]:
    return frozenset(set().union(*(_defined(root) for root in LIBS.values())))


@cache
def own_private() -> frozenset[str]:
    return frozenset(_defined(SRC))


def _root(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript | ast.Await):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


class _Scan(ast.NodeVisitor):
    def __init__(self, rel: str) -> None:
        self.rel = rel
        self.lib_names: set[str] = set()  # names bound to the libraries' modules/objects
        self.made: set[str] = set()  # variables holding objects the libraries made
        self.self_is_lib = [False]
        self.found: list[str] = []

    def flag(self, node: ast.AST, what: str) -> None:
        self.found.append(f"{self.rel}:{getattr(node, 'lineno', 0)}: {what}")

    def _from_lib(self, node: ast.expr) -> bool:
        root = _root(node)
        return root is not None and (root in self.lib_names or root in self.made)

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            top = a.name.split(".")[0]
            if top in LIBS:
                self.lib_names.add((a.asname or a.name).split(".")[0])
                if any(_private(p) for p in a.name.split(".")):
                    self.flag(node, f"import {a.name}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = node.module or ""
        if node.level == 0 and mod.split(".")[0] in LIBS:
            if any(_private(p) for p in mod.split(".")):
                self.flag(node, f"from {mod} import ...")
            for a in node.names:
                self.lib_names.add(a.asname or a.name)
                if _private(a.name):
                    self.flag(node, f"from {mod} import {a.name}")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.self_is_lib.append(any(self._from_lib(b) for b in node.bases))
        self.generic_visit(node)
        self.self_is_lib.pop()

    def visit_Assign(self, node: ast.Assign) -> None:
        if isinstance(node.value, ast.Call | ast.Await) and self._from_lib(node.value):
            self.made.update(t.id for t in node.targets if isinstance(t, ast.Name))
        self.generic_visit(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        name = node.attr
        if _private(name):
            base = node.value
            is_self = isinstance(base, ast.Name) and base.id in ("self", "cls")
            if is_self:
                # In a subclass of a library class, any private name on self may be (or
                # become) the library's own.
                bad = self.self_is_lib[-1]
            elif self._from_lib(base):
                bad = True
            else:
                bad = name in library_private() and name not in own_private()
            if bad:
                self.flag(node, f"attribute {name}")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        fn = node.func
        literal = len(node.args) > 1 and isinstance(node.args[1], ast.Constant)
        if literal and isinstance(fn, ast.Name) and fn.id in _REFLECTION:
            name = node.args[1].value  # type: ignore[attr-defined]
            if (
                isinstance(name, str)
                and _private(name)
                and name in library_private()
                and (self._from_lib(node.args[0]) or name not in own_private())
            ):
                self.flag(node, f"{fn.id}(..., {name!r})")
        self.generic_visit(node)


def scan(path: Path) -> list[str]:
    s = _Scan(str(path.relative_to(SRC.parent)))
    s.visit(ast.parse(path.read_text()))
    return s.found


def product_files() -> Iterator[Path]:
    yield from sorted(SRC.rglob("*.py"))


def test_the_libraries_private_names_are_known() -> None:
    # The scan is only as good as this set: it must hold what the libraries really hide.
    names = library_private()
    for name in (
        "_retry_connection",
        "_server",
        "_messages",
        "_request_handler",
        "_connection_kwargs",
        "_loop",
    ):
        assert name in names, name


def test_product_code_touches_no_private_name_of_aiohttp_or_redis() -> None:
    found = [hit for path in product_files() for hit in scan(path)]
    assert not found, "private aiohttp/redis-py names in product code:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "code",
    [
        "from aiohttp.web_protocol import _ErrInfo",
        "import aiohttp._http_parser",
        "from aiohttp import web\nsite = web.TCPSite(r, 'h', 1)\nprint(site._server)",
        "def f(s):\n    s._retry_connection = False",
        "def f(s):\n    return hasattr(s, '_retry_connection')",
        "from aiohttp import web\nclass H(web.RequestHandler):\n    def f(self):\n"
        "        return self._messages",
        "import redis\nr = redis.Redis()\nr._conn",
    ],
)
def test_the_scan_catches_private_uses(code: str) -> None:
    s = _Scan("probe")
    s.visit(ast.parse(code))
    assert s.found, code
