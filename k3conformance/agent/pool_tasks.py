"""Agentic coding tasks from real Python projects: the `swe_mutants` pool (docs/suites.md).

The pool (`fixtures/pools/swe_mutants/`, the lead's pool format: a manifest and one gzipped
JSON-lines file) holds two kinds of line. A project line (`"type": "project"`) is one
PyPI sdist as the task sees it: its package and its own tests (`files`), the same tests as
hidden tests under `hidden_tests/` (imports of the test package pointed there), and the ids
of the tests its own code passes when the verdict runs them (`passing`: the tests that
decide every task of the project). A task line (`"type": "task"`) is one bug put into one
function (k3conformance/agent/mutants.py): the function as the project has it
(`original`, the reference solution) and with the bug (`mutated`), the bug report
(`statement`, written from the failing tests' behaviour, never naming the place of the fix),
the tests the bug breaks (`fail_to_pass`) and the file of the first of them
(`visible_tests`). A task of several files (`"bug_kind": "two files"`) holds its bugs under
`edits` instead, each with its own `path`, `function`, `bug_kind`, `original` and `mutated`.
`fixtures/pools/build_swe_mutants.py` builds and validates the pool.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from k3conformance.agent.mutants import BUG_KINDS, REVERTED_FIX, TWO_FILES
from k3conformance.agent.tasks import AgentTask, TaskSet
from k3conformance.datasets.bundled import fixtures_dir
from k3conformance.datasets.pools import PoolUnavailable
from k3conformance.datasets.pools import read_pool as read_pool_folder

POOL_NAME = "swe_mutants"
# A file of the project longer than this makes its bug harder to find: more to read.
LONG_FILE_LINES = 600


class PoolError(ValueError):
    """The pool's files do not match its manifest, or an item is malformed."""


@dataclass(frozen=True)
class PoolTask:
    """A task of the pool with what the manifest and docs report of it."""

    task: AgentTask
    project: str
    bug_kind: str
    fail_to_pass: tuple[str, ...]


def pool_dir(name: str = POOL_NAME) -> Path:
    return fixtures_dir() / "pools" / name


def read_pool(directory: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The manifest and the items, the data file's hash checked against the manifest (datasets/pools.py)."""
    try:
        pool = read_pool_folder(directory, POOL_NAME)
    except PoolUnavailable as error:
        raise PoolError(str(error)) from None
    return pool.manifest, list(pool.items)


@cache
def load_pool_tasks(directory: Path | None = None) -> tuple[TaskSet, tuple[PoolTask, ...]]:
    """Every task of the pool, in the pool's order (projects interleaved: any first N spans
    the projects), as agent tasks."""
    root = directory or pool_dir()
    manifest, items = read_pool(root)
    projects = {item["name"]: item for item in items if item.get("type") == "project"}
    tasks = tuple(pool_task(item, projects[item["project"]]) for item in items if item.get("type") == "task")
    return TaskSet(f"pool:{manifest['name']}", str(manifest["sha256"]), tuple(t.task for t in tasks)), tasks


def pool_task(item: Mapping[str, Any], project: Mapping[str, Any]) -> PoolTask:
    """One task: the project with the bug in (start), as published (solution), its tests hidden."""
    files: dict[str, str] = dict(project["files"])
    edits = item.get("edits") or [item]
    start = dict(files)
    for edit in edits:
        path, original, mutated = str(edit["path"]), str(edit["original"]), str(edit["mutated"])
        if start.get(path, "").count(original) != 1:
            raise PoolError(f"task {item['id']}: the function's source must occur exactly once in {path}")
        start[path] = start[path].replace(original, mutated)
    if len({str(edit["path"]) for edit in edits}) != len(edits):
        raise PoolError(f"task {item['id']}: two of its edits are in one file")
    # Each bug to find is a step, and each long file to find it in one more.
    difficulty = len(edits) + any(files[str(edit["path"])].count("\n") > LONG_FILE_LINES for edit in edits)
    task = AgentTask(
        id=str(item["id"]),
        family=str(item["project"]),
        kind="bugfix",
        difficulty=difficulty,
        statement=str(item["statement"]),
        start=start,
        solution=files,
        hidden=dict(project["hidden"]),
        hidden_ids=tuple(project["passing"]),
        visible_tests=str(item["visible_tests"]),
    )
    return PoolTask(task, str(item["project"]), str(item["bug_kind"]), tuple(item["fail_to_pass"]))


def pool_provenance(directory: Path | None = None) -> dict[str, Any]:
    """What a run's identity records of the pool: name, hash, license and every source."""
    manifest, _ = read_pool(directory or pool_dir())
    keys = ("name", "sha256", "items", "license", "sources")
    return {key: manifest[key] for key in keys}


def summary_table(sources: list[dict[str, Any]]) -> str:
    """The pool's projects as docs/suites.md shows them (the builder prints the same table)."""
    kinds = (*BUG_KINDS, REVERTED_FIX, TWO_FILES)
    lines = [
        "| project | version | license | tasks | " + " | ".join(kinds) + " | deciding tests |",
        "|---|---|---|---|" + "---|" * len(kinds) + "---|",
    ]
    for source in sources:
        counts = " | ".join(str(source["bug_kinds"].get(kind, 0)) for kind in kinds)
        lines.append(
            f"| {source['name']} | {source['version']} | {source['license']} | {source['tasks']} | {counts} "
            f"| {source['deciding_tests']} |"
        )
    total = [sum(source["bug_kinds"].get(kind, 0) for source in sources) for kind in kinds]
    lines.append(
        f"| all {len(sources)} | | | {sum(source['tasks'] for source in sources)} | "
        + " | ".join(map(str, total))
        + f" | {sum(source['deciding_tests'] for source in sources)} |"
    )
    return "\n".join(lines)
