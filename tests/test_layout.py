"""The house's plan, checked rather than hoped for.

- A failing `suites/test_X.py::test_Y` leads to `k3conformance/checks/X.py::check_Y` (a
  conformance suite), or to the one module that scores suite X (an accuracy suite).
- The package is built in floors (`FLOORS`, the module map of docs/architecture.md): a module
  imports only from its own room or from a lower floor, so there is no circle, and the
  statistics leaf (`stats/`) imports nothing of the project at all.
- The plugin's own tests mirror the package: `tests/unit/<package>/` for each package.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from run_files import CONFORMANCE_SUITES, CONTRACT_SUITE, LOAD_SUITE, REPO

CHECKS = REPO / "k3conformance" / "checks"


def _functions(path: Path) -> dict[str, ast.FunctionDef]:
    tree = ast.parse(path.read_text())
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}


def _called_names(function: ast.FunctionDef) -> set[str]:
    names = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            target = node.func
            names.add(target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", ""))
    return names


# The parser matrix needs no endpoint, so the fault-profile runs leave it out; it is named like the others.
CHECKED_SUITES = (*CONFORMANCE_SUITES, "test_parsers.py", LOAD_SUITE, CONTRACT_SUITE)


@pytest.mark.parametrize("suite_file", CHECKED_SUITES)
def test_every_test_calls_the_check_named_like_it(suite_file: str) -> None:
    suite = suite_file.removeprefix("test_").removesuffix(".py")
    module = CHECKS / f"{suite}.py"
    assert module.is_file(), f"suites/{suite_file} has no checks module k3conformance/checks/{suite}.py"
    checks = _functions(module)
    tests = {name: node for name, node in _functions(REPO / "suites" / suite_file).items() if name.startswith("test_")}
    assert tests, suite_file
    for name, node in tests.items():
        check = "check_" + name.removeprefix("test_")
        assert check in checks, f"suites/{suite_file}::{name} has no {check} in k3conformance/checks/{suite}.py"
        assert check in _called_names(node), f"suites/{suite_file}::{name} does not call {check}"


def test_every_suite_file_is_known() -> None:
    """A new suite file is either a conformance suite (listed, with checks) or an accuracy suite."""
    accuracy = {
        "test_coding.py",
        "test_math.py",
        "test_long_context.py",
        "test_agentic_coding.py",
        "test_small_model.py",
    }
    found = {path.name for path in (REPO / "suites").glob("test_*.py")}
    assert found - accuracy == set(CHECKED_SUITES)


# Accuracy suite -> the module that scores (or plays) it.
ACCURACY_SUITES = {
    "test_math.py": "k3conformance/scoring/math_answers.py",
    "test_coding.py": "k3conformance/scoring/code_solutions.py",
    "test_long_context.py": "k3conformance/datasets/long_tasks.py",
    "test_agentic_coding.py": "k3conformance/agent/loop.py",
}


@pytest.mark.parametrize(("suite_file", "module"), ACCURACY_SUITES.items())
def test_every_accuracy_suite_uses_the_module_named_for_it(suite_file: str, module: str) -> None:
    assert (REPO / module).is_file(), module
    dotted = module.removesuffix(".py").replace("/", ".")
    imported = {
        node.module for node in ast.walk(ast.parse((REPO / "suites" / suite_file).read_text()))
        if isinstance(node, ast.ImportFrom) and node.module
    }  # fmt: skip
    assert dotted in imported, f"suites/{suite_file} does not import {dotted}"


# The floors of the package, lowest first. A room may import from its own floor's rooms only
# when they are the same room; otherwise only downwards. `gate.report` sits above
# `gate.sequential` (the reports draw the looks), which sits above the rest of `gate` (the
# sequential rule settles findings of the verdict).
FLOORS: tuple[tuple[str, ...], ...] = (
    ("stats", "formatting", "__init__"),
    ("runs",),
    ("datasets",),
    ("endpoint",),
    ("options",),
    ("probes",),
    ("deployment",),
    ("xtml",),
    ("scoring",),
    ("sandbox",),
    ("checks",),
    ("agent",),
    ("reference",),
    ("gate",),
    ("gate.sequential",),
    ("gate.report",),
    ("audit",),
    ("run",),
    ("plugin",),
    ("cli",),
    ("__main__",),
)
FLOOR_OF = {room: level for level, rooms in enumerate(FLOORS) for room in rooms}
PACKAGE = REPO / "k3conformance"


# The gate's reports beside report.py (per-suite verdicts, the shape matrix and its page): they read
# the sequential gate's results, so they sit on its floor.
REPORT_MODULES = ("suite_verdicts", "matrix", "matrix_html")


def room_of(module: str) -> str:
    """`k3conformance.gate.sequential.plan` -> `gate.sequential`; `k3conformance.run.hooks` -> `run`."""
    parts = module.split(".")[1:]
    if not parts:
        return "__init__"
    if parts[0] == "gate" and len(parts) > 1 and parts[1] in ("sequential", "report"):
        return f"gate.{parts[1]}"
    if parts[0] == "gate" and len(parts) > 1 and parts[1] in REPORT_MODULES:
        return "gate.report"
    return parts[0]


def module_name(path: Path) -> str:
    dotted = ".".join(path.relative_to(REPO).with_suffix("").parts)
    return dotted.removesuffix(".__init__")


def imported_modules(path: Path) -> list[tuple[str, int]]:
    """The project modules `path` imports (lazily and under TYPE_CHECKING too), with their lines."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("k3conformance"):
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                is_module = (REPO / child.replace(".", "/")).with_suffix(".py").is_file() or (
                    REPO / child.replace(".", "/")
                ).is_dir()
                found.append((child if is_module else node.module, node.lineno))
        elif isinstance(node, ast.Import):
            found += [(alias.name, node.lineno) for alias in node.names if alias.name.startswith("k3conformance")]
    return found


def test_every_room_of_the_package_has_a_floor() -> None:
    rooms = {room_of(module_name(path)) for path in PACKAGE.rglob("*.py")}
    assert rooms - set(FLOOR_OF) == set(), "add the new room to FLOORS (and to docs/architecture.md)"


def test_imports_run_only_downwards() -> None:
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        room = room_of(module_name(path))
        for target, line in imported_modules(path):
            other = room_of(target)
            if other != room and FLOOR_OF[other] >= FLOOR_OF[room]:
                upward.append(f"{path.relative_to(REPO)}:{line} ({room}) imports {target} ({other})")
    assert upward == []


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles of an import graph: its strongly connected components of more than one module,
    or of one that imports itself (Tarjan's algorithm, iterative), each sorted, in sorted order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root] & graph.keys())))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target] & graph.keys()))))
                elif target in on_stack:
                    low[module] = min(low[module], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1 or module in graph[module]:
                    circles.append(sorted(component))
    return sorted(circles)


def test_the_circle_finder_finds_circles_and_only_circles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}, "f": {"d", "outside"}}
    assert import_circles(graph) == [["a", "b", "c"], ["e"]]
    assert import_circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circle_in_the_package() -> None:
    """No two modules import each other, by any path: at module level, inside functions (lazily) or
    under TYPE_CHECKING. The floors allow a room to import itself, so this is what keeps a room's
    own modules from going round (it found run.activation <-> run.state, and xtml.parsers' adapters
    importing the package module that imports them)."""
    graph = {
        module_name(path): {target for target, _ in imported_modules(path)} for path in sorted(PACKAGE.rglob("*.py"))
    }
    assert import_circles(graph) == []


def test_the_statistics_leaf_imports_nothing_of_the_project() -> None:
    for path in (PACKAGE / "stats").rglob("*.py"):
        outside = [target for target, _ in imported_modules(path) if room_of(target) != "stats"]
        assert outside == [], path


def test_the_module_map_names_every_room() -> None:
    architecture = (REPO / "docs" / "architecture.md").read_text()
    for room in FLOOR_OF:
        if room not in ("__init__", "__main__"):
            assert re.search(rf"`{re.escape(room.replace('.', '/'))}(/|\.py)?`", architecture), room


def test_the_unit_tests_mirror_the_package() -> None:
    packages = {path.parent.relative_to(PACKAGE) for path in PACKAGE.rglob("__init__.py")} - {Path(".")}
    for folder in (REPO / "tests" / "unit").rglob("*"):
        if folder.is_dir() and folder.name != "__pycache__":
            assert folder.relative_to(REPO / "tests" / "unit") in packages, folder


def test_a_session_against_an_endpoint_imports_no_scipy() -> None:
    """What every run imports before its first request stays off scipy (half a second of
    start-up, a fifth of the harness's cost at 2,000 requests: benchmarks/README.md): only the
    gate and the simulator's server draw on it, and they import it where they use it."""
    request_path = (
        "k3conformance.run.hooks",
        "k3conformance.endpoint.preflight",
        "k3conformance.reference.profiles",
        "k3conformance.probes.runner",
        "k3conformance.datasets.suite_items",
    )
    script = "import sys\n" + "".join(f"import {name}\n" for name in request_path)
    script += "print('scipy' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=REPO)
    assert done.stdout.strip() == "False"
