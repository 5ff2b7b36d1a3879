"""A failing `suites/test_X.py::test_Y` leads to `k3conformance/checks/X.py::check_Y`.

The naming is the map a newcomer follows from a red test to the code that judged it, so it
is checked rather than hoped for: every conformance suite has its checks module, and every
test calls the check named like it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from run_files import CONFORMANCE_SUITES, REPO

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
CHECKED_SUITES = (*CONFORMANCE_SUITES, "test_parsers.py")


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
