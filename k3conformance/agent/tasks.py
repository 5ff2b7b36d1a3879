"""The agentic coding tasks: small Python repositories built from `fixtures/agentic_coding/`.

Each family there is one working repository (`repo/`: a package with `core.py` and
`cli.py`, visible tests in `tests/`), its hidden tests (`hidden/`, never shown to the
agent; they decide the score) and `family.json`, which says how to break it. From one
family come tasks of four kinds and graded difficulty (per family: seven bug fixes, two
features, two refactors, one spec):

- `bugfix` (1): one bug put into one function of `core.py` (a find/replace that must match
  exactly once), reported by its symptom, with a visible test that shows it;
- `feature` (2): a function missing from `core.py` and its command missing from `cli.py`:
  a change across two files, both written whole;
- `refactor` (2): functions to move into a new module while `core.py` keeps exporting the
  very same objects, so the existing tests stay green;
- `spec` (3, 4 for the long module): every function body of `core.py` replaced by
  `raise NotImplementedError` under its docstring: the agent writes the whole module, a
  long output.

The reference solution of every task is the family's working repository (plus the task's
visible test), so each one is verified the same way in `tests/unit/agent/test_agentic_tasks.py`: the
solution passes the hidden tests and the starting state fails them.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from k3conformance.datasets.bundled import fixtures_dir

TaskKind = Literal["bugfix", "feature", "refactor", "spec"]
KINDS: tuple[TaskKind, ...] = ("bugfix", "feature", "refactor", "spec")
TASKS_DIR = "agentic_coding"
VISIBLE_TESTS = "tests/test_core.py"
# Hidden tests are copied here only to score the final state, never during the loop.
HIDDEN_DIR = "hidden_tests"
# Modules longer than this make a spec task a level harder: more to write in one output.
LONG_MODULE_LINES = 120
_DIFFICULTY: Mapping[TaskKind, int] = {"bugfix": 1, "feature": 2, "refactor": 2, "spec": 3}


@dataclass(frozen=True)
class AgentTask:
    id: str
    family: str
    kind: TaskKind
    difficulty: int
    statement: str
    start: Mapping[str, str]
    solution: Mapping[str, str]
    hidden: Mapping[str, str]
    # The hidden tests that decide, by unittest id, where the hidden files hold more than
    # that (a real project's suite: the tests its own code passes); empty: all of them.
    hidden_ids: tuple[str, ...] = ()
    # The visible test file the task's report points at (the scripted reference agent reads it).
    visible_tests: str = VISIBLE_TESTS

    def changed_paths(self) -> list[str]:
        """Files the reference solution writes (new or different), in path order."""
        return sorted(path for path, text in self.solution.items() if self.start.get(path) != text)

    def content_sha256(self) -> str:
        """A hash of everything the task is: statement, starting files, solution and hidden tests."""
        content = {
            "kind": self.kind,
            "statement": self.statement,
            "start": dict(self.start),
            "solution": dict(self.solution),
            "hidden": dict(self.hidden),
            **({"hidden_ids": list(self.hidden_ids)} if self.hidden_ids else {}),
        }
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class TaskSet:
    name: str
    sha256: str
    tasks: tuple[AgentTask, ...]


def tasks_dir() -> Path:
    return fixtures_dir() / TASKS_DIR


@cache
def load_tasks(directory: Path | None = None) -> TaskSet:
    """Every task of every family, in a fixed order; the hash covers every file they come from."""
    root = directory or tasks_dir()
    if not root.is_dir():
        raise FileNotFoundError(f"agentic coding tasks not found: {root}")
    digest = hashlib.sha256()
    families: list[list[AgentTask]] = []
    for family_dir in sorted(path for path in root.iterdir() if (path / "family.json").is_file()):
        files = _read_tree(family_dir)
        for relative in sorted(files):
            digest.update(f"{family_dir.name}/{relative}\0{files[relative]}\0".encode())
        families.append(_family_tasks(family_dir.name, files))
    return TaskSet(f"fixture:{TASKS_DIR}", digest.hexdigest(), tuple(_stratified(families)))


def _stratified(families: list[list[AgentTask]]) -> list[AgentTask]:
    """The order `--k3-limit N` takes the first N of: one task of every kind first (each
    from another family), then the kinds in proportion to their counts (a smooth weighted
    round robin), each kind's tasks taken round robin over the families. So any first N
    holds every kind from N = 4 and about its share of long-output tasks."""
    queues: dict[TaskKind, list[AgentTask]] = {}
    for offset, kind in enumerate(KINDS):
        rotated = families[offset % len(families) :] + families[: offset % len(families)]
        by_family = [[task for task in family if task.kind == kind] for family in rotated]
        queues[kind] = [task for group in itertools.zip_longest(*by_family) for task in group if task is not None]
    weights = {kind: len(queue) for kind, queue in queues.items()}
    ordered = [queues[kind].pop(0) for kind in KINDS if queues[kind]]
    credit = dict.fromkeys(KINDS, 0)
    while any(queues.values()):
        for kind in KINDS:
            credit[kind] += weights[kind]
        kind = max((kind for kind in KINDS if queues[kind]), key=lambda kind: credit[kind])
        credit[kind] -= sum(weights.values())
        ordered.append(queues[kind].pop(0))
    return ordered


def _read_tree(directory: Path) -> dict[str, str]:
    return {
        path.relative_to(directory).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(directory.rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def _family_tasks(family: str, files: Mapping[str, str]) -> list[AgentTask]:
    spec: dict[str, Any] = json.loads(files["family.json"])
    package = str(spec["package"])
    repo = {path.removeprefix("repo/"): text for path, text in files.items() if path.startswith("repo/")}
    hidden = {
        f"{HIDDEN_DIR}/{path.removeprefix('hidden/')}": text
        for path, text in files.items()
        if path.startswith("hidden/")
    }
    hidden[f"{HIDDEN_DIR}/__init__.py"] = ""
    core_path = f"{package}/core.py"
    long_module = repo[core_path].count("\n") > LONG_MODULE_LINES

    def task(
        kind: TaskKind,
        suffix: str,
        statement: str,
        start: Mapping[str, str],
        solution: Mapping[str, str],
        extra_hidden: Mapping[str, str] | None = None,
    ) -> AgentTask:
        difficulty = _DIFFICULTY[kind] + (kind == "spec" and long_module)
        hidden_tests = {**hidden, **(extra_hidden or {})}
        return AgentTask(f"{family}-{suffix}", family, kind, difficulty, statement, start, solution, hidden_tests)

    tasks: list[AgentTask] = []
    for bug in spec["bugs"]:
        solution = {**repo, VISIBLE_TESTS: _with_visible_test(repo[VISIBLE_TESTS], "test_reported_bug", bug["visible"])}
        start = {**solution, core_path: _replace_once(repo[core_path], bug["find"], bug["replace"], family)}
        statement = (
            f"Bug report for the {package} package ({spec['title']}): {bug['symptom']}. Find the cause in "
            f"{core_path} and fix it without changing what the docstrings describe."
        )
        tasks.append(task("bugfix", f"bug-{bug['function'].replace('_', '-')}", statement, start, solution))

    for feature in spec["features"]:
        check = f'self.assertIn("{feature["command"]}", cli.COMMANDS)'
        solution = {**repo, VISIBLE_TESTS: _with_visible_test(repo[VISIBLE_TESTS], "test_new_command", check)}
        start = {
            **solution,
            core_path: _without_functions(repo[core_path], [feature["function"]]),
            f"{package}/cli.py": _without_command(repo[f"{package}/cli.py"], feature["command"], family),
        }
        tasks.append(task("feature", f"feature-{feature['command']}", feature["statement"], start, solution))

    for refactor in spec["refactors"]:
        module, moved = str(refactor["module"]), list(refactor["functions"])
        same = "\n        ".join(f"self.assertIs(core.{name}, {module}.{name})" for name in moved)
        moved_check = f"from {package} import {module}\n\n        {same}"
        start = {**repo, VISIBLE_TESTS: _with_visible_test(repo[VISIBLE_TESTS], "test_moved_functions", moved_check)}
        solution = {**start, **_moved(repo[core_path], package, module, moved)}
        names = ", ".join(f"`{name}`" for name in moved)
        statement = (
            f"Refactor the {package} package: move the functions {names} out of {core_path} into a new module "
            f"{package}/{module}.py. {core_path} must import them from there, so that code using "
            f"{package}.core.NAME keeps working with the very same function objects, and no behaviour may change."
        )
        refactor_test = _refactor_test(package, module, moved)
        tasks.append(task("refactor", f"refactor-{module}", statement, start, solution, refactor_test))

    start = {**repo, core_path: _stubbed(repo[core_path])}
    statement = (
        f"Implement {core_path} of the {package} package ({spec['title']}): every function there raises "
        "NotImplementedError. Write each one exactly as its docstring specifies, keeping names and signatures; "
        f"{package}/cli.py uses them."
    )
    tasks.append(task("spec", "spec", statement, start, dict(repo)))
    return tasks


def _refactor_test(package: str, module: str, moved: list[str]) -> dict[str, str]:
    """Hidden checks of the new structure: the functions live in the new module, and core
    re-exports the same objects (behaviour is the family's hidden tests' business)."""
    checks = "\n".join(
        f'        self.assertEqual({module}.{name}.__module__, "{package}.{module}")\n'
        f"        self.assertIs(core.{name}, {module}.{name})"
        for name in moved
    )
    source = (
        f"import unittest\n\nfrom {package} import core, {module}\n\n\n"
        f"class HiddenRefactorTest(unittest.TestCase):\n    def test_moved(self):\n{checks}\n"
    )
    return {f"{HIDDEN_DIR}/test_hidden_refactor.py": source}


def _replace_once(source: str, find: str, replace: str, family: str) -> str:
    if source.count(find) != 1:
        raise ValueError(f"family {family}: a bug's find text must occur exactly once: {find!r}")
    return source.replace(find, replace)


def _with_visible_test(source: str, name: str, body: str) -> str:
    """The visible test file with one more test method at the end of its test class."""
    marker = '\n\nif __name__ == "__main__":'
    head, found, tail = source.partition(marker)
    if not found:
        raise ValueError(f'{VISIBLE_TESTS} must end with an `if __name__ == "__main__":` block')
    return f"{head.rstrip()}\n\n    def {name}(self):\n        {body}\n{marker}{tail}"


def _function_spans(source: str) -> dict[str, tuple[int, int]]:
    """Top-level functions' first and last line (1-based, inclusive)."""
    return {
        node.name: (node.lineno, node.end_lineno or node.lineno)
        for node in ast.parse(source).body
        if isinstance(node, ast.FunctionDef)
    }


def function_source(source: str, name: str) -> str:
    first, last = _function_spans(source)[name]
    return "\n".join(source.splitlines()[first - 1 : last])


def _without_functions(source: str, names: list[str]) -> str:
    spans = _function_spans(source)
    lines = source.splitlines()
    drop = {line for name in names for line in range(spans[name][0], spans[name][1] + 1)}
    kept = "\n".join(line for number, line in enumerate(lines, start=1) if number not in drop)
    return re.sub(r"\n{4,}", "\n\n\n", kept).rstrip() + "\n"


def _without_command(source: str, command: str, family: str) -> str:
    lines = [line for line in source.splitlines(keepends=True) if line.lstrip().startswith(f'"{command}":')]
    if len(lines) != 1:
        raise ValueError(f"family {family}: cli.py must have exactly one one-line entry for command {command!r}")
    return source.replace(lines[0], "")


def _moved(core: str, package: str, module: str, names: list[str]) -> dict[str, str]:
    """The refactored core.py (re-exporting the moved functions) and the new module."""
    imports = [line for line in core.splitlines() if line.startswith(("import ", "from "))]
    bodies = "\n\n\n".join(function_source(core, name) for name in names)
    header = f'"""Moved out of {package}/core.py, which re-exports them."""\n\n'
    new_module = header + ("\n".join(imports) + "\n\n\n" if imports else "\n") + bodies + "\n"
    remaining = _without_functions(core, names)
    import_line = f"from {package}.{module} import {', '.join(names)}  # noqa: F401 (re-exported)"
    tree = ast.parse(remaining)
    after = max(
        (node.end_lineno or 0 for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))), default=0
    )
    if after == 0 and tree.body and isinstance(tree.body[0], ast.Expr):
        after = tree.body[0].end_lineno or 0  # just below the module docstring
    lines = remaining.splitlines()
    lines[after:after] = ["", import_line] if after else [import_line]
    return {f"{package}/core.py": "\n".join(lines) + "\n", f"{package}/{module}.py": new_module}


def _stubbed(source: str) -> str:
    """Every top-level function's body, below its docstring, replaced by NotImplementedError."""
    lines = source.splitlines()
    for node in sorted(
        (node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)),
        key=lambda node: node.lineno,
        reverse=True,
    ):
        body = node.body[1:] if ast.get_docstring(node) is not None else node.body
        if not body:
            continue
        indent = " " * body[0].col_offset
        lines[body[0].lineno - 1 : node.end_lineno] = [f"{indent}raise NotImplementedError"]
    return "\n".join(lines) + "\n"
