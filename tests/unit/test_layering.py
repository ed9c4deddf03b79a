"""Dependencies point one way: cli/entrypoints -> feature packages (bench, gateway, tune,
batch, diagnose, report, monitor, importers) -> client / telemetry / engine / servermodel
/ stats / control
-> core.

Every module's imports are read with ``ast`` (nothing is executed): ``import`` and
``from ... import`` statements anywhere in the module (inside functions and under
``TYPE_CHECKING`` too), relative imports, and ``importlib.import_module("...")`` calls
with a literal name. The same reading gives the module graph: no module may import
itself through others (no cycle, not even a lazy or a type-only one).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

import infersight

ROOT = Path(infersight.__file__).parent

TOP = {"cli", "entrypoints"}
FEATURES = {"bench", "gateway", "batch", "diagnose", "report", "monitor", "tune", "importers"}
LOWER = {"client", "telemetry", "engine", "servermodel", "stats", "control", "flags"}
#: What each lower package may import besides itself and core: telemetry's live
#: sampling probes a server through the client; the server model is fitted from a
#: run's aggregates (stats); stats is maths over core's records; control (the adaptive
#: concurrency law the gateway and batch share) is pure; flags (the settings declared
#: once) is what the CLI imports at start; nothing imports upward.
LOWER_MAY_IMPORT = {
    "client": set(),
    "telemetry": {"client"},
    "engine": set(),
    "servermodel": {"stats"},
    "stats": set(),
    "control": set(),
    "flags": set(),
}
#: Support packages: data files. (The fake servers and real-server launchers of the
#: tests are a package of their own, ``infersight_testkit``, which the product never
#: imports.)
SUPPORT = {"data"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _targets(node: ast.AST, module: str, is_package: bool) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom):
        if node.level:
            base = module.split(".")
            base = base[: len(base) - node.level + (1 if is_package else 0)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        yield prefix
        # `from infersight import bench` names the subpackage in the alias
        yield from (f"{prefix}.{a.name}" for a in node.names)
    elif isinstance(node, ast.Call):
        fn = node.func
        name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
        if name == "import_module" and node.args and isinstance(node.args[0], ast.Constant):
            yield str(node.args[0].value)


@cache
def imports() -> dict[str, set[str]]:
    """package -> {(module, imported infersight package)} as 'module -> package'."""
    out: dict[str, set[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        module = _module_name(path)
        parts = module.split(".")
        if len(parts) < 2:
            continue  # infersight/__init__.py
        pkg = parts[1]
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            for target in _targets(node, module, path.name == "__init__.py"):
                t = target.split(".")
                if t[0] == "infersight" and len(t) > 1 and t[1] != pkg:
                    out.setdefault(pkg, set()).add(f"{module} -> {t[1]}")
    return out


def _uses(pkg: str, other: str) -> list[str]:
    return sorted(e for e in imports().get(pkg, set()) if e.endswith(f" -> {other}"))


def _packages() -> set[str]:
    return {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}


def test_every_package_has_a_layer() -> None:
    assert _packages() == TOP | FEATURES | LOWER | SUPPORT | {"core"}


def test_the_import_reader_sees_what_it_must() -> None:
    # Guards the reader itself: known edges of today's tree are found.
    assert _uses("bench", "client") and _uses("cli", "entrypoints")
    assert _uses("entrypoints", "engine")  # function-level imports count
    assert _uses("report", "stats") and _uses("servermodel", "stats")


def test_core_imports_no_other_package() -> None:
    assert sorted(imports().get("core", set())) == []


@pytest.mark.parametrize("pkg", sorted(LOWER))
def test_lower_packages_import_only_core(pkg: str) -> None:
    allowed = {"core"} | LOWER_MAY_IMPORT[pkg]
    bad = [e for e in sorted(imports().get(pkg, set())) if e.rsplit(" -> ", 1)[1] not in allowed]
    assert bad == []


@pytest.mark.parametrize("pkg", sorted(FEATURES))
def test_no_feature_package_imports_the_engine_or_the_cli(pkg: str) -> None:
    assert [*_uses(pkg, "engine"), *_uses(pkg, "cli"), *_uses(pkg, "entrypoints")] == []


def test_importers_import_only_core_and_stats() -> None:
    """Reading another tool's file needs nothing but the record types and aggregates."""
    bad = [
        e
        for e in sorted(imports().get("importers", set()))
        if not e.endswith((" -> core", " -> stats"))
    ]
    assert bad == [] and _uses("importers", "core")


def test_diagnose_imports_neither_client_nor_telemetry() -> None:
    assert [*_uses("diagnose", "client"), *_uses("diagnose", "telemetry")] == []


@pytest.mark.parametrize("pkg", sorted(FEATURES))
def test_feature_packages_do_not_import_each_other(pkg: str) -> None:
    assert [e for f in sorted(FEATURES - {pkg}) for e in _uses(pkg, f)] == []


def test_entrypoints_do_not_import_the_cli() -> None:
    assert _uses("entrypoints", "cli") == []


@pytest.mark.parametrize("pkg", sorted(SUPPORT))
def test_support_packages_import_only_core(pkg: str) -> None:
    bad = [e for e in sorted(imports().get(pkg, set())) if not e.endswith(" -> core")]
    assert bad == []


def test_the_product_never_imports_the_test_kit() -> None:
    """The wheel ships no fake server: ``infersight_testkit`` lives beside the product
    (``testkit/``), installed only in the development venv."""
    users = []
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        module = _module_name(path)
        for node in ast.walk(tree):
            for target in _targets(node, module, path.name == "__init__.py"):
                if target.split(".")[0] == "infersight_testkit":
                    users.append(module)
    assert users == []


def test_only_the_entrypoints_start_the_engine() -> None:
    """``EmbeddedEngine`` is constructed in one place below the tests."""
    users = []
    for path in sorted(ROOT.rglob("*.py")):
        if path.parent.name == "engine":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "EmbeddedEngine":
                users.append(_module_name(path))
    assert users == ["infersight.entrypoints.engine"]


@cache
def module_graph() -> dict[str, set[str]]:
    """module -> the infersight modules it imports (every import the reader sees:
    module level, under ``TYPE_CHECKING`` and inside functions). A name that is not a
    module (``from infersight.bench.config import BenchConfig``) is dropped, so an edge
    goes to the module that defines or re-exports it, or to the package's ``__init__``."""
    paths = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        tree = ast.parse(path.read_text(), str(path))
        graph[module] = {
            t
            for node in ast.walk(tree)
            for t in _targets(node, module, path.name == "__init__.py")
            if t in paths and t != module
        }
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle (its modules, the first one repeated at the end), or []."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return []

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return []


def longest_chain(graph: dict[str, set[str]], within: str) -> list[str]:
    """The longest import chain through modules under ``within`` (a DAG: no cycles)."""
    nodes = {m for m in graph if m.startswith(within + ".")}
    best: dict[str, list[str]] = {}

    def chain(node: str) -> list[str]:
        if node not in best:
            tails = [chain(n) for n in sorted(graph[node] & nodes)]
            best[node] = [node, *max(tails, key=len, default=[])]
        return best[node]

    return max((chain(m) for m in sorted(nodes)), key=len, default=[])


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) == []
    assert longest_chain({"p.a": {"p.b", "q"}, "p.b": {"p.c"}, "p.c": set(), "q": set()}, "p") == [
        "p.a",
        "p.b",
        "p.c",
    ]


def test_the_module_graph_sees_what_it_must() -> None:
    graph = module_graph()
    # function-level imports count (the entrypoint starts the engine lazily)
    assert any(t.startswith("infersight.engine") for t in graph["infersight.entrypoints.engine"])
    assert "infersight.bench.executor" in graph["infersight.bench.distributed.workers"]


def test_no_import_cycle_between_modules() -> None:
    """No module imports itself through others, not even lazily or for types only: a
    cycle papered over with an in-function or ``TYPE_CHECKING`` import still ties the
    modules together; the shared piece belongs in a module both import."""
    assert find_cycle(module_graph()) == []


#: The deepest chain of imports inside ``bench``, in modules. Today's deepest are the
#: distributed package -> ray_workers -> ray_actor -> executor -> replay.dispatch ->
#: level.work; runner -> level.run -> distributed.workers -> executor -> replay.dispatch
#: -> level.work; and runner -> config -> replay.rules -> replay.check -> replay.read ->
#: replay.formats: BenchConfig checks a trace when it is built. The modules that run the
#: benchmark take the configuration's sections (``flags.bench``, a leaf), not
#: BenchConfig, so only the runner sits above those checks; the types handed around
#: (Target, LevelWork) are leaf modules, so that what takes them is one step above.
BENCH_DEPTH = 6


def test_bench_import_chains_stay_short() -> None:
    chain = longest_chain(module_graph(), "infersight.bench")
    assert len(chain) <= BENCH_DEPTH, " -> ".join(chain)
