"""The agentic coding tasks (`fixtures/agentic_coding/`) and the agent's tools: every task's
reference solution passes its hidden tests and its starting state fails them, scored the
way the suite scores; tools run in the sandbox on a copy and refuse paths outside it."""

from __future__ import annotations

import asyncio
import re
from collections import Counter

import pytest

from k3conformance.agent.isolation import decide
from k3conformance.agent.tasks import HIDDEN_DIR, AgentTask, load_tasks
from k3conformance.agent.tools import Workspace, path_problem
from k3conformance.sandbox import BUBBLEWRAP, RLIMIT, SandboxPool, sandbox_backend

TASKS = load_tasks().tasks
POOL = SandboxPool(2)


def hidden_passes(files: dict[str, str] | object, task: AgentTask) -> bool:
    workspace = Workspace(dict(files) if isinstance(files, dict) else dict(task.start), POOL)
    return asyncio.run(workspace.hidden_tests(task.hidden)).passed


def test_at_least_forty_tasks_of_every_kind_and_graded_difficulty() -> None:
    assert len(TASKS) >= 40
    assert len({task.id for task in TASKS}) == len(TASKS)
    assert set(Counter(task.kind for task in TASKS)) == {"bugfix", "feature", "refactor", "spec"}
    assert {task.difficulty for task in TASKS} == {1, 2, 3, 4}
    # --k3-limit N runs the first N: every kind from N = 4, every family from N = 10, and
    # each kind about in its share (within two tasks of its count times N over 60) from there on.
    kinds = Counter(task.kind for task in TASKS)
    assert {task.kind for task in TASKS[:4]} == set(kinds)
    assert {task.family for task in TASKS[:10]} == {task.family for task in TASKS}
    for size in range(10, len(TASKS) + 1):
        first = Counter(task.kind for task in TASKS[:size])
        assert all(abs(first[kind] - size * kinds[kind] / len(TASKS)) <= 2 for kind in kinds), size


@pytest.mark.parametrize("task", TASKS, ids=lambda task: task.id)
def test_solution_passes_the_hidden_tests_and_the_start_fails_them(task: AgentTask) -> None:
    assert task.changed_paths(), "the solution must change something"
    assert not any(path.startswith(f"{HIDDEN_DIR}/") for path in (*task.start, *task.solution))
    assert hidden_passes(dict(task.solution), task), f"{task.id}: the reference solution fails its hidden tests"
    assert not hidden_passes(dict(task.start), task), f"{task.id}: the starting state already passes"


def test_spec_tasks_start_from_docstrings_only() -> None:
    spec = next(task for task in TASKS if task.kind == "spec")
    core = next(path for path in spec.changed_paths() if path.endswith("core.py"))
    assert "raise NotImplementedError" in spec.start[core]
    assert '"""' in spec.start[core] and len(spec.solution[core]) > 1.5 * len(spec.start[core])


@pytest.mark.parametrize(
    "path", ["/etc/passwd", "../outside.py", "pkg/../../outside.py", "hidden_tests/test_hidden.py", "", "C:/x"]
)
def test_paths_outside_the_copy_are_refused_with_a_message(path: str) -> None:
    workspace = Workspace(dict(TASKS[0].start), POOL)
    result = asyncio.run(workspace.call("read_file", {"path": path}))
    assert not result.ok and result.refused == "path outside the repository"
    problem = path_problem(path)
    assert problem is not None and result.text.startswith("error: ") and problem in result.text


def test_tools_change_only_the_copy_and_report_deterministically() -> None:
    task = TASKS[0]
    workspace = Workspace(dict(task.start), POOL)

    def call(name: str, **arguments: str) -> str:
        result = asyncio.run(workspace.call(name, arguments))
        return result.text

    assert "tests/test_core.py" in call("list_files")
    assert call("write_file", path="notes/todo.txt", content="one\ntwo\n") == "wrote notes/todo.txt (2 lines)"
    assert call("read_file", path="notes/todo.txt") == "one\ntwo\n"
    assert "occurs 2 times" in call("edit_file", path="notes/todo.txt", old="o", new="0")
    assert call("edit_file", path="notes/todo.txt", old="two", new="three") == "edited notes/todo.txt"
    assert workspace.files["notes/todo.txt"] == "one\nthree\n"
    assert "notes/todo.txt" not in task.start
    first, second = call("run_tests"), call("run_tests")
    # No timings, temporary paths or addresses: a resumed run rebuilds the same conversation.
    assert first == second and first.startswith("tests failed") and "Ran 5 tests\n" in first
    assert not re.search(r" in [0-9.]+s| at 0x[0-9a-f]|/tmp/|/sandbox/", first)


def test_agent_tools_need_filesystem_isolation_unless_opted_in() -> None:
    assert decide(BUBBLEWRAP, "bwrap", opted_in=False).allowed
    refused = decide(RLIMIT, "rlimits only", opted_in=False)
    assert not refused.allowed and "--k3-agent-unisolated" in refused.refusal()
    assert refused.describe().startswith("agentic_coding refused")
    opted = decide(RLIMIT, "rlimits only", opted_in=True)
    assert opted.allowed and "WITHOUT filesystem isolation" in opted.describe()
    assert not decide(None, "no sandbox", opted_in=True).allowed
    if sandbox_backend()[0] == BUBBLEWRAP:
        assert decide(*sandbox_backend(), opted_in=False).describe().startswith("agentic_coding tools run in")
