"""The tests wait on events, never on the clock (issue 46).

Every test module under ``tests/`` is read with ``ast`` (nothing is executed) for
three things that make a test flaky on a loaded machine or slow on an idle one:

- a ``time.sleep(...)`` call: a blocking wait for "long enough";
- an ``asyncio.sleep(<number>)`` call with a number other than 0 (``sleep(0)`` is a
  yield, not a wait; a sleep of a variable is a fake's configured behaviour);
- a wall-clock delta (``time.monotonic() - t0``, ``perf_counter``, ``time.time``, or
  a name bound to one) compared to a number: ``assert took < 2.0``.

Waiting belongs to :mod:`support.waiting` (``until`` and friends poll an event with a
give-up bound). A fake whose sleep *is* the behaviour a test drives is listed in
:data:`ALLOWED` with its reason; nothing else may sleep.
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

CLOCKS = {"monotonic", "perf_counter", "time", "monotonic_ns", "perf_counter_ns"}

#: path under tests/ -> why its sleeps (or timings) are not waits on the clock.
ALLOWED: dict[str, str] = {
    "support/waiting.py": "the one owner of polling: it sleeps between looks at an event",
    "support/raw_http.py": "a slow client: the pauses between the parts it sends are the "
    "behaviour the listener tests drive (a test's parameter)",
    "integration/client/keepalive_server.py": "a server that writes its events 2 ms apart "
    "and closes a kept-alive connection after a set time: what the keep-alive tests drive",
    "integration/client/test_client_drain_equiv.py": "its server writes each event apart so "
    "that the client reads them one by one: the reads the test compares",
    "integration/diagnose/test_diagnose_engine.py": "a hog that blocks the load generator's "
    "loop 40 ms of every 60 on purpose: the starved client the rule must find",
    "integration/testing/test_testing_fake_truth.py": "tests the fake's own pacing (a server "
    "slow by design): the seconds are the behaviour, and only lower bounds are asserted, "
    "which a sleep cannot miss",
}


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _is_clock_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    name = _dotted(node.func)
    return name.startswith("time.") and name.split(".", 1)[1] in CLOCKS


def _number(node: ast.AST) -> float | None:
    """The value of a literal number or arithmetic of them (``0.01 + 200 * 0.002``)."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        v = _number(node.operand)
        return None if v is None else -v
    if isinstance(node, ast.BinOp):
        a, b = _number(node.left), _number(node.right)
        if a is None or b is None:
            return None
        ops = {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}
        return ops.get(type(node.op), a / b if isinstance(node.op, ast.Div) and b else None)
    return None


class _Scan(ast.NodeVisitor):
    """Collects the offending lines of one module."""

    def __init__(self) -> None:
        self.found: list[tuple[int, str]] = []
        self.stamps: set[str] = set()  # names bound to a reading of the clock (or one moved)
        self.deltas: set[str] = set()  # names bound to a difference of two readings
        self.delta_funcs: set[str] = set()  # module-level functions that return one
        self._depth = 0

    def _mentions_clock(self, node: ast.AST) -> bool:
        return any(
            _is_clock_call(n) or (isinstance(n, ast.Name) and n.id in self.stamps)
            for n in ast.walk(node)
        )

    def _is_delta(self, node: ast.AST) -> bool:
        for n in ast.walk(node):
            if (
                isinstance(n, ast.BinOp)
                and isinstance(n.op, ast.Sub)
                and self._mentions_clock(n.left)
                and self._mentions_clock(n.right)
            ):
                return True  # reading minus reading: seconds passed, not a point in time
            if isinstance(n, ast.Name) and n.id in self.deltas:
                return True
            if isinstance(n, ast.Call) and _dotted(n.func) in self.delta_funcs:
                return True
        return False

    def _bind(self, targets: list[ast.expr], value: ast.expr) -> None:
        # only a plain name: of ``err, took = fail()`` nothing says which is the delta
        names = [t.id for t in targets if isinstance(t, ast.Name)]
        if self._is_delta(value):
            self.deltas.update(names)
        elif self._mentions_clock(value):
            self.stamps.update(names)

    def visit_Assign(self, node: ast.Assign) -> None:
        self._bind(node.targets, node.value)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._bind([node.target], node.value)
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._depth += 1
        self.generic_visit(node)
        self._depth -= 1
        returns = [n.value for n in ast.walk(node) if isinstance(n, ast.Return) and n.value]
        # a nested helper's name (``go``) is reused from test to test: module level only
        if self._depth == 0 and any(self._is_delta(v) for v in returns):
            self.delta_funcs.add(node.name)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Call(self, node: ast.Call) -> None:
        name = _dotted(node.func)
        if name == "time.sleep":
            self.found.append((node.lineno, "time.sleep"))
        elif (
            name == "asyncio.sleep"
            and node.args
            and _number(node.args[0]) not in (None, 0.0)  # sleep(0) is a yield, not a wait
        ):
            self.found.append((node.lineno, "asyncio.sleep(<number>)"))
        self.generic_visit(node)

    def visit_Assert(self, node: ast.Assert) -> None:
        # what a test claims, not a loop's own deadline (``if left <= 0``); each pair of
        # a chain on its own, and 0 is an order (at or after), not a duration
        for n in ast.walk(node.test):
            if isinstance(n, ast.Compare):
                sides = [n.left, *n.comparators]
                for a, b in itertools.pairwise(sides):
                    for num, other in ((a, b), (b, a)):
                        if _number(num) not in (None, 0.0) and self._is_delta(other):
                            self.found.append((n.lineno, "wall-clock delta compared to a number"))
        self.generic_visit(node)


def _offences() -> list[str]:
    out: list[str] = []
    for path in sorted(TESTS.rglob("*.py")):
        rel = path.relative_to(TESTS).as_posix()
        if rel in ALLOWED:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        # twice: a helper that returns a delta may be defined below its first use
        scan = _Scan()
        scan.visit(tree)
        again = _Scan()
        again.delta_funcs = scan.delta_funcs
        again.visit(tree)
        out += [f"{rel}:{line}: {what}" for line, what in again.found]
    return out


def test_no_test_waits_on_the_clock() -> None:
    offences = _offences()
    assert not offences, (
        "wait on an event (support.waiting.until), not on the clock; a fake whose sleep "
        "is the behaviour under test goes in ALLOWED with its reason:\n" + "\n".join(offences)
    )


def test_the_scan_sees_each_kind() -> None:
    code = (
        "import asyncio, time\n"
        "def took():\n"
        "    t0 = time.monotonic()\n"
        "    return time.monotonic() - t0\n"
        "async def f():\n"
        "    time.sleep(0.1)\n"
        "    await asyncio.sleep(0.5)\n"
        "    await asyncio.sleep(0)\n"
        "    t = time.perf_counter()\n"
        "    d = time.perf_counter() - t\n"
        "    assert d < 2.0\n"
        "    assert took() < 1\n"
        "    assert d >= 0\n"  # an order, not a duration
        "    now = time.time()\n"
        "    past = now - 30\n"  # a point in time, not seconds passed
        "    assert past < 5\n"
        "    assert 0 <= d <= took()\n"  # a relation between two timings
    )
    scan = _Scan()
    scan.visit(ast.parse(code))
    assert [line for line, _ in scan.found] == [6, 7, 11, 12]


def test_every_allowed_file_exists() -> None:
    missing = [rel for rel in ALLOWED if not (TESTS / rel).is_file()]
    assert not missing, missing
