"""The agentic coding tasks (`fixtures/agentic_coding/`) and the agent's tools: every task's
reference solution passes its hidden tests and its starting state fails them, scored the
way the suite scores; tools run in the sandbox on a copy and refuse paths outside it."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import tracemalloc
from collections import Counter

import pytest
from hostile_agent import MEMORY_FORGERY

from k3conformance.agent.isolation import decide
from k3conformance.agent.tasks import HIDDEN_DIR, AgentTask, load_tasks
from k3conformance.agent.tools import (
    OUTPUT_FILE,
    REPO_DIR,
    TOOL_LIMITS,
    Workspace,
    hidden_test_ids,
    judge_hidden,
    path_problem,
    tool_output,
)
from k3conformance.agent.verdict import hidden_verdict_program, repository_packages
from k3conformance.sandbox import BUBBLEWRAP, RLIMIT, ExecutionResult, SandboxPool, sandbox_backend

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


# Forgeries of issue 25 (finding 3): on main b7dd69a the first two turned the start state's
# "exit status 1" into a solve, since the runner imported unittest after putting the
# repository on sys.path and a run passed on exit status 0.
FORGERIES = {
    "unittest.py at the root": {"unittest.py": "import os\nos._exit(0)\n"},
    "os._exit(0) in the package": {"PACKAGE/__init__.py": "import os\nos._exit(0)\n"},
    "sys.exit(0) in the package": {"PACKAGE/__init__.py": "import sys\nsys.exit(0)\n"},
    "sitecustomize.py": {"sitecustomize.py": "import os\nos._exit(0)\n"},
    "a .pth file": {"k3.pth": "import os; os._exit(0)\n"},
    "json.py and traceback.py": {"json.py": "import os\nos._exit(0)\n", "traceback.py": "import os\nos._exit(0)\n"},
    "a printed report": {"PACKAGE/__init__.py": "print('\\nk3-seal 0 \"{}\"')\nimport os\nos._exit(0)\n"},
}


@pytest.mark.parametrize("forgery", FORGERIES)
def test_a_forged_runner_or_an_early_exit_does_not_solve_a_task(forgery: str) -> None:
    task = next(task for task in TASKS if task.kind == "bugfix")
    package = task.changed_paths()[0].split("/")[0]
    files = {path.replace("PACKAGE", package): text for path, text in FORGERIES[forgery].items()}
    assert not hidden_passes({**task.start, **files}, task)
    # The same files next to the fix do no harm where they are not imported.
    if forgery in ("sitecustomize.py", "a .pth file", "json.py and traceback.py"):
        assert hidden_passes({**task.solution, **files}, task)


# Package code that patches the runner in-process when the hidden tests import it (issue 25,
# gap 3). On main f3ebd69 each of them solved the task with its bug unfixed; on b41d0b0 the
# runner's note of its machinery caught them. Now the hidden tests run in a process that never
# imports the package: each patch changes only the model's process, whose unittest decides
# nothing. Two of them break the package's import there (BREAK_THE_IMPORT: `object` takes
# no attributes where no `_Recorder` is found; no frame of a hidden test is on M's stack).
TAMPERING = {
    "unittest.TestCase.run replaced at import": """
import unittest


def run(self, result=None):
    result.startTest(self)
    result.addSuccess(self)
    result.stopTest(self)


unittest.TestCase.run = run
""",
    "the result classes' addFailure and addError replaced at import": """
import sys, unittest

for owner in (unittest.TestResult, unittest.TextTestResult, getattr(sys.modules["__main__"], "_Recorder", object)):
    owner.addFailure = owner.addError = lambda self, test, err: self.addSuccess(test)
""",
    "a __getattribute__ put on TestCase that empties every test": """
import unittest


def __getattribute__(self, name):
    value = object.__getattribute__(self, name)
    return (lambda: None) if name.startswith("test") and callable(value) else value


unittest.TestCase.__getattribute__ = __getattribute__
""",
    "the hidden module's own unittest swapped for one whose TestCase empties its subclasses": """
import sys, types, unittest


class TestCase(unittest.TestCase):
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in list(vars(cls)):
            if name.startswith("test"):
                setattr(cls, name, lambda self: None)


frame = sys._getframe(1)
while not frame.f_globals.get("__name__", "").startswith("hidden_tests."):
    frame = frame.f_back
swapped = types.ModuleType("unittest")
swapped.__dict__.update(vars(unittest))
swapped.TestCase = TestCase
frame.f_globals["unittest"] = swapped
""",
}


BREAK_THE_IMPORT = frozenset(list(TAMPERING)[1::2])


@pytest.mark.parametrize("tampering", TAMPERING)
def test_package_code_that_patches_the_runner_does_not_solve_a_task(tampering: str) -> None:
    task = TASKS[0]
    init = f"{task.changed_paths()[0].split('/')[0]}/__init__.py"
    patched = {init: task.start.get(init, "") + TAMPERING[tampering]}
    outcome = asyncio.run(Workspace({**task.start, **patched}, POOL).hidden_tests(task.hidden))
    assert not outcome.passed, outcome
    # Next to the fix, the patch reaches no runner: the verdict is the honest one.
    fixed = asyncio.run(Workspace({**task.solution, **patched}, POOL).hidden_tests(task.hidden))
    assert fixed.report is not None and fixed.report.tampered == (), fixed
    assert fixed.passed is (tampering not in BREAK_THE_IMPORT), fixed.reason


def test_run_tests_still_tells_the_model_its_runner_was_patched() -> None:
    """The in-process runner the model calls for feedback keeps its note of what decides a
    verdict: a package that patches unittest hears that the runner was tampered with."""
    task = TASKS[0]
    init = f"{task.changed_paths()[0].split('/')[0]}/__init__.py"
    patched = {init: task.solution.get(init, "") + TAMPERING["unittest.TestCase.run replaced at import"]}
    result = asyncio.run(Workspace({**task.solution, **patched}, POOL).call("run_tests", {}))
    assert not result.ok and result.text.startswith("tests failed (the test runner was tampered with)"), result.text


def test_a_package_that_fails_to_import_is_an_error_not_tampering() -> None:
    """unittest itself stores state on its classes (a failed import's stand-in gets a
    tearDown_exceptions list): that is no tampering, the tests just did not pass."""
    task = TASKS[0]
    init = f"{task.changed_paths()[0].split('/')[0]}/__init__.py"
    broken = {**task.solution, init: "raise ImportError('broken on purpose')\n"}
    outcome = asyncio.run(Workspace(broken, POOL).hidden_tests(task.hidden))
    assert outcome.report is not None and outcome.report.tampered == (), outcome.report
    assert not outcome.passed and "hidden tests did not pass" in outcome.reason and " error" in outcome.reason


# The forgery the in-process runner did not hold (issue 25): package code reads the seal's
# token from the wrapper's frame and prints a report of its own. On main b41d0b0 it solved
# the task; the hidden tests now run in a process that never imports the package
# (agent/verdict.py, sandbox/boundary.py), so the token is in no memory the package can read.
_TOKEN_FROM_MEMORY = """
import ast, json, os, sys

frame = sys._getframe()
while frame.f_code.co_name != "_k3_sealed_run":
    frame = frame.f_back
outcomes = {}
for folder, _, names in os.walk("."):
    for name in names:
        if name.startswith("test") and name.endswith(".py"):
            path = os.path.join(folder, name)
            module = os.path.relpath(path)[:-3].replace(os.sep, ".")
            for node in ast.parse(open(path).read()).body:
                if isinstance(node, ast.ClassDef):
                    for item in node.body:
                        if isinstance(item, ast.FunctionDef) and item.name.startswith("test"):
                            outcomes[f"{module}.{node.name}.{item.name}"] = "passed"
payload = json.dumps(json.dumps({"run": len(outcomes), "outcomes": outcomes, "tampered": []}, sort_keys=True))
os.write(1, b"\\nk3-seal " + frame.f_locals["token"] + b" " + payload.encode() + b"\\n")
os._exit(0)
"""

# The same forgery written against the split runner (MEMORY_FORGERY, shared with the
# hostile-agent harness), each way of finding the token: then it ends (os._exit(0)), goes
# on, or kills T. In the in-process runner of b41d0b0 the frame walks, the gc scan and
# /proc/self/mem found the token and solved the task.
_FIND = {
    "a frame walk, as on main": None,
    "a frame walk over every frame's locals": """
tokens, frame = set(), sys._getframe()
while frame is not None:
    for value in list(frame.f_locals.values()):
        tokens |= _tokens_in(value)
    frame = frame.f_back
_forge(tokens)
os._exit(0)
""",
    "a gc scan of every object": """
tokens = set()
for holder in gc.get_objects():
    for value in gc.get_referents(holder):
        tokens |= _tokens_in(value)
_forge(tokens)
os._exit(0)
""",
    "its own memory through /proc/self/mem": "_forge(_memory_of('self'))\nos._exit(0)\n",
    "the trusted process's memory through /proc/<ppid>/mem": "_forge(_memory_of(os.getppid()))\nos._exit(0)\n",
    "a printed report without the token": "_forge(set())\nos._exit(0)\n",
    "a forged report, then the package goes on": "_forge(_memory_of('self'))\n",
    "killing the trusted process after the forgery": "_forge(_memory_of('self'))\nos.kill(os.getppid(), signal.SIGKILL)\n",
}


def _forgery(task: AgentTask, find: str) -> dict[str, str]:
    init = f"{task.changed_paths()[0].split('/')[0]}/__init__.py"
    outcomes = dict.fromkeys(sorted(hidden_test_ids(task.hidden)), "passed")
    find_tokens = _FIND[find]
    code = (
        _TOKEN_FROM_MEMORY if find_tokens is None else MEMORY_FORGERY.replace("OUTCOMES", repr(outcomes)) + find_tokens
    )
    return {init: task.start.get(init, "") + code}


@pytest.mark.parametrize("find", _FIND)
def test_a_report_forged_with_the_seal_token_read_from_memory_does_not_solve_a_task(find: str) -> None:
    task = TASKS[0]
    assert not hidden_passes({**task.start, **_forgery(task, find)}, task)


_PROBE = """
import ctypes, json, os, signal

results, parent = {}, os.getppid()
for name, path, flags in (
    ("mem", f"/proc/{parent}/mem", os.O_RDONLY),
    ("environ", f"/proc/{parent}/environ", os.O_RDONLY),
    ("fd/1 for writing", f"/proc/{parent}/fd/1", os.O_WRONLY),
    ("fd/1 for reading", f"/proc/{parent}/fd/1", os.O_RDONLY),
    ("init's fd/1", "/proc/1/fd/1", os.O_WRONLY),
    ("own mem (control)", "/proc/self/mem", os.O_RDONLY),
):
    try:
        os.close(os.open(path, flags))
        results[name] = "opened"
    except OSError as error:
        results[name] = error.strerror
try:
    results["fd list"] = str(len(os.listdir(f"/proc/{parent}/fd")))
except OSError as error:
    results["fd list"] = error.strerror
libc = ctypes.CDLL(None, use_errno=True)
results["ptrace attach"] = "attached" if libc.ptrace(16, parent, None, None) == 0 else os.strerror(ctypes.get_errno())


class _Iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("length", ctypes.c_size_t)]


buffer = ctypes.create_string_buffer(16)
local, remote = _Iovec(ctypes.cast(buffer, ctypes.c_void_p), 16), _Iovec(0x400000, 16)
read = libc.process_vm_readv(parent, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
results["process_vm_readv"] = "read" if read >= 0 else os.strerror(ctypes.get_errno())
os.kill(parent, 0)  # a signal reaches it: killing it fails the run, which is all it can do
results["signal 0"] = "delivered"
with open("../tool-output.txt", "a") as handle:
    handle.write("PROBE " + json.dumps(results, sort_keys=True) + "\\n")
"""


def test_the_models_process_cannot_reach_the_trusted_process() -> None:
    """Inside the sandbox the model's process (same uid, no capabilities) cannot read the
    trusted one's memory, environment or descriptors, nor ptrace it: T is not dumpable. Its
    own memory opens (the probe works); a signal reaches T, which only fails the run."""
    task = TASKS[0]
    init = f"{task.changed_paths()[0].split('/')[0]}/__init__.py"
    files = {**task.solution, init: task.solution.get(init, "") + _PROBE}
    outcome_run = asyncio.run(_hidden_run(files, task))
    line = next(line for line in tool_output(outcome_run).splitlines() if line.startswith("PROBE "))
    results = json.loads(line.removeprefix("PROBE "))
    assert results.pop("own mem (control)") == "opened" and results.pop("signal 0") == "delivered", results
    reached = {name: result for name, result in results.items() if result in ("opened", "attached", "read")}
    assert reached == {} and results["fd list"] == "Permission denied", results
    # The probe did not disturb the verdict: the fix still passes.
    assert judge_hidden(outcome_run, hidden_test_ids(task.hidden)).passed


async def _hidden_run(files: dict[str, str], task: AgentTask) -> ExecutionResult:
    program = hidden_verdict_program(task.hidden, HIDDEN_DIR, repository_packages(files))
    copy = {f"{REPO_DIR}/{path}": text for path, text in files.items()}
    return await POOL.run(program, TOOL_LIMITS, files=copy, collect=(OUTPUT_FILE,), seal=True)


def test_solved_needs_every_hidden_test_reported_as_passed() -> None:
    task = TASKS[0]
    expected = hidden_test_ids(task.hidden)
    assert expected and all(test.startswith("hidden_tests.") for test in expected)
    outcome = asyncio.run(Workspace(dict(task.solution), POOL).hidden_tests(task.hidden))
    assert outcome.passed and outcome.reason == "passed" and outcome.report is not None
    assert outcome.report.passed >= expected
    # A hidden test the runner never reported is not a pass, whatever the exit status.
    report = json.dumps({"run": 1, "outcomes": {min(expected): "passed"}, "tampered": []})
    unreported = dataclasses.replace(outcome_execution(), sealed=report)
    judged = judge_hidden(unreported, expected)
    assert not judged.passed and judged.reason.startswith(f"{len(expected) - 1} hidden tests not reported as passed")
    assert not judge_hidden(dataclasses.replace(outcome_execution(), sealed=None), expected).passed
    extra = {
        **task.hidden,
        "hidden_tests/test_more.py": "import unittest\n\n\nclass More(unittest.TestCase):\n    def test_x(self):\n        self.fail('no')\n",
    }
    failed = asyncio.run(Workspace(dict(task.solution), POOL).hidden_tests(extra))
    assert not failed.passed and "hidden_tests.test_more.More.test_x failed" in failed.reason


def outcome_execution() -> ExecutionResult:
    return ExecutionResult(True, "passed", 0, None, False, 0.1, "", "", backend=BUBBLEWRAP)


def test_run_tests_brings_back_only_its_output() -> None:
    """A test that leaves 64 sparse files of 16 MiB used to cost the host 1 GiB per call
    (finding 2): run_tests now reads back nothing but its output."""
    task = TASKS[0]
    sparse = (
        "import unittest\n\n\nclass Sparse(unittest.TestCase):\n    def test_sparse(self):\n"
        "        for i in range(64):\n            with open(f'sparse-{i}', 'wb') as handle:\n"
        "                handle.truncate(16 * 2**20 - 1)\n"
    )
    workspace = Workspace({**task.start, "tests/test_sparse.py": sparse}, POOL)
    tracemalloc.start()
    try:
        text = asyncio.run(workspace.call("run_tests", {})).text
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 * 2**20, peak
    assert text.startswith("tests failed (1 of 6 did not pass)") and "Ran 6 tests" in text, text
