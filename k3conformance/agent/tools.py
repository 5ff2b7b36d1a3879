"""The agent's tools, each call run in the sandbox against a fresh copy of the task repository.

The repository lives between calls as a mapping path -> text (`Workspace`). Every call
writes that copy into a new sandbox directory (`repo/` next to the program), runs a small
program written here that does the one operation, and, for the tools that change files,
takes the copy back as the program left it. Paths are checked twice: here, before
anything runs (absolute paths, `..`, the hidden tests' directory are refused with an
error message to the model), and again inside the sandbox against the resolved path.
What a tool prints is made deterministic (no timings, no temporary paths, no addresses),
so a resumed run rebuilds exactly the conversation it had and its requests match the
recorded ones.
"""

from __future__ import annotations

import ast
import dataclasses
import fnmatch
import json
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from k3conformance.agent import shell_tools
from k3conformance.agent.tasks import HIDDEN_DIR
from k3conformance.agent.verdict import RECORDER, hidden_verdict_program, repository_packages
from k3conformance.sandbox import ExecutionResult, SandboxLimits, SandboxPool
from k3conformance.sandbox.memo import ProgramMemo
from k3conformance.sandbox.process import Collect

REPO_DIR = "repo"
OUTPUT_FILE = "tool-output.txt"
# What one tool result may put into the conversation; more is cut with a note.
RESULT_CHARS = 20_000
# Fewer processes at a lower address-space cap than the default, and 1 GiB for the whole run
# where a memory cgroup holds it (without one, sandbox.fallback_limits: 8 processes of 512 MiB
# address space, 4 GiB at worst). What comes back is capped too (sparse files cost the
# program nothing).
TOOL_LIMITS = SandboxLimits(
    cpu_seconds=20,
    wall_seconds=30,
    memory_bytes=1 << 30,
    processes=8,
    collect_files=2000,
    collect_bytes=8 << 20,
    sandbox_memory_bytes=1 << 30,
)
FINISH = "finish"


def _function(name: str, description: str, properties: Mapping[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": dict(properties),
                "required": required,
                "additionalProperties": False,
            },
        },
    }


_PATH = {"type": "string", "description": "Path relative to the repository root, e.g. pkg/core.py"}
TOOL_SPECS: tuple[dict[str, Any], ...] = (
    _function("list_files", "List every file of the repository with its size in lines.", {}, []),
    _function("read_file", "Read one file of the repository; the text comes back whole.", {"path": _PATH}, ["path"]),
    _function(
        "write_file",
        "Create or overwrite a file of the repository with the given text.",
        {"path": _PATH, "content": {"type": "string", "description": "The whole new text of the file"}},
        ["path", "content"],
    ),
    _function(
        "edit_file",
        "Replace one exact occurrence of `old` in a file by `new` (fails when `old` occurs zero or several times).",
        {"path": _PATH, "old": {"type": "string"}, "new": {"type": "string"}},
        ["path", "old", "new"],
    ),
    _function("run_tests", "Run the repository's tests (unittest discovery under tests/) and show the report.", {}, []),
    *shell_tools.specs(_function, _PATH),
    _function(
        FINISH,
        "Stop: the task is done (or cannot be done). The hidden tests then decide.",
        {"summary": {"type": "string", "description": "What was changed and why"}},
        ["summary"],
    ),
)
TOOLS_BY_NAME: Mapping[str, dict[str, Any]] = {spec["function"]["name"]: spec for spec in TOOL_SPECS}


@dataclass(frozen=True)
class Toolset:
    """The tools one run offers the model, and the system prompt that names them."""

    name: str
    specs: tuple[dict[str, Any], ...]
    system_prompt: str

    @property
    def by_name(self) -> Mapping[str, dict[str, Any]]:
        return {spec["function"]["name"]: spec for spec in self.specs}


_PROMPT_TAIL = (
    "Paths are relative to the repository root; nothing outside it is reachable. Hidden tests decide "
    "whether the task is solved."
)
# `all`: the suite's own tools and the open agents' beside them. `shell`: only what
# mini-swe-agent (bash), SWE-agent and OpenHands (bash and the string-replacement editor) give
# a model, so every look, edit and test run goes through the shell and the editor.
TOOLSETS: Mapping[str, Toolset] = {
    "all": Toolset(
        "all",
        TOOL_SPECS,
        "You are a careful software engineer working in a Python repository through tools. Read what you "
        "need, change files with write_file, edit_file or str_replace_editor, run the tests with run_tests or "
        f"commands with bash, and call finish when the task is done. {_PROMPT_TAIL}",
    ),
    "shell": Toolset(
        "shell",
        tuple(TOOLS_BY_NAME[name] for name in (shell_tools.SHELL, shell_tools.EDITOR, FINISH)),
        "You are a careful software engineer working in a Python repository through tools. Look around and "
        "run commands (the tests too: python3 -m unittest) with bash, view and change files with "
        f"str_replace_editor, and call finish when the task is done. {_PROMPT_TAIL}",
    ),
}
CHANGES_FILES = frozenset({"write_file", "edit_file", shell_tools.SHELL, shell_tools.EDITOR})


@dataclass(frozen=True)
class ToolResult:
    text: str  # what goes back to the model as the tool message
    ok: bool
    # Why the call was refused or failed before doing anything ("path outside the
    # repository", "sandbox error"), None when it ran.
    refused: str | None = None


def path_problem(path: object) -> str | None:
    """Why `path` may not be used, or None: it must be a relative path inside the copy."""
    if not isinstance(path, str) or not path.strip():
        return "the path must be a non-empty string"
    normalized = posixpath.normpath(path)
    if path.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", path):
        return f"{path!r} is absolute: paths are relative to the repository root"
    if normalized == ".." or normalized.startswith("../") or "\\" in path:
        return f"{path!r} is outside the repository"
    if normalized.split("/")[0] == HIDDEN_DIR:
        return f"{path!r} is not part of the repository"
    return None


# The programs. Each runs with the task copy in ./repo; ARGUMENTS is the call's JSON.
_PRELUDE = r"""
import json, os, re, sys
ARGUMENTS = json.loads(%r)
ROOT = os.path.realpath("repo")
OUTPUT = os.path.realpath("tool-output.txt")
os.chdir(ROOT)


def emit(text, end="\n"):
    with open(OUTPUT, "a", encoding="utf-8") as handle:
        handle.write(text + end)


def inside(path):
    resolved = os.path.realpath(os.path.join(ROOT, path))
    if resolved != ROOT and not resolved.startswith(ROOT + os.sep):
        emit("error: " + repr(path) + " is outside the repository")
        sys.exit(2)
    return resolved


def clean(text):
    text = text.replace(ROOT + os.sep, "").replace(ROOT, ".")
    text = re.sub(r"Ran (\d+) tests? in [0-9.]+s", r"Ran \1 tests", text)
    return re.sub(r" at 0x[0-9a-f]+", " at 0x…", text)
"""

_PROGRAMS: Mapping[str, str] = {
    **shell_tools.PROGRAMS,
    "list_files": r"""
for folder, folders, names in os.walk(ROOT):
    folders[:] = sorted(name for name in folders if name != "__pycache__")
    for name in sorted(names):
        path = os.path.join(folder, name)
        with open(path, encoding="utf-8", errors="replace") as handle:
            lines = handle.read().count("\n")
        emit(f"{os.path.relpath(path, ROOT)} ({lines} lines)")
""",
    "read_file": r"""
path = inside(ARGUMENTS["path"])
if not os.path.isfile(path):
    emit("error: no such file: " + ARGUMENTS["path"])
    sys.exit(2)
with open(path, encoding="utf-8", errors="replace") as handle:
    emit(handle.read(), end="")
""",
    "write_file": r"""
path = inside(ARGUMENTS["path"])
os.makedirs(os.path.dirname(path), exist_ok=True)
with open(path, "w", encoding="utf-8") as handle:
    handle.write(ARGUMENTS["content"])
emit("wrote " + ARGUMENTS["path"] + f" ({ARGUMENTS['content'].count(chr(10))} lines)")
""",
    "edit_file": r"""
path = inside(ARGUMENTS["path"])
if not os.path.isfile(path):
    emit("error: no such file: " + ARGUMENTS["path"])
    sys.exit(2)
with open(path, encoding="utf-8") as handle:
    text = handle.read()
count = text.count(ARGUMENTS["old"]) if ARGUMENTS["old"] else 0
if count != 1:
    emit(f"error: `old` occurs {count} times in {ARGUMENTS['path']}; it must occur exactly once")
    sys.exit(2)
with open(path, "w", encoding="utf-8") as handle:
    handle.write(text.replace(ARGUMENTS["old"], ARGUMENTS["new"]))
emit("edited " + ARGUMENTS["path"])
""",
    # Everything the runner uses is imported before the repository is on sys.path, and the
    # repository goes at its end (discover then leaves it there): a file of the repository
    # named like a standard module (unittest.py, json.py, traceback.py) never replaces one.
    # The per-test outcomes go back through the sandbox's seal, so a run that exits early
    # (os._exit(0), sys.exit(0)) reports nothing and passes nothing. Before anything of the
    # repository is imported, the runner notes what decides a verdict (unittest's classes and
    # module functions, the builtins, the import and trace hooks, its own names); after the
    # run it reports what was replaced, and where each test method's code comes from, so
    # package code that patches the runner at import is caught (docs/sandbox.md says what
    # deliberate in-process tampering can still do).
    "run_tests": r"""
import builtins, difflib, fnmatch, importlib, importlib.util, io, linecache, pprint, tokenize, traceback, unittest
import unittest.case, unittest.loader, unittest.result, unittest.runner, unittest.suite, warnings

# Compiled files are looked for (and never found) under /proc, which nobody can write: a
# forged __pycache__/*.pyc of a real test file (its mtime and size copied) is never loaded.
sys.pycache_prefix = "/proc/k3-no-bytecode"

_report = json.dumps
_unittest_modules = (unittest, unittest.case, unittest.loader, unittest.result, unittest.runner, unittest.suite)


"""
    + RECORDER
    + r"""

def _identity(value):
    # Plain data is unittest's own state (a class's tearDown_exceptions list, set per run);
    # changed, it can hide tests but never pass one, so it is not watched.
    if type(value) in (type(None), bool, int, float, str, bytes, list, tuple, dict, set, frozenset):
        return "data"
    return id(value), id(getattr(value, "__code__", None)), id(getattr(value, "__func__", None))


def _verdict_machinery():
    noted = {}
    for module in (*_unittest_modules, builtins):
        noted["sys.modules[" + module.__name__ + "]"] = id(sys.modules.get(module.__name__))
        for name, value in list(vars(module).items()):
            noted[module.__name__ + "." + name] = _identity(value)
            if isinstance(value, type) and module is not builtins:
                for attribute, member in list(vars(value).items()):
                    noted[module.__name__ + "." + name + "." + attribute] = _identity(member)
    for attribute, member in list(vars(_Recorder).items()):
        noted["_Recorder." + attribute] = _identity(member)
    for name in ("_report", "_Recorder", "emit", "clean", "_identity",
                 "_verdict_machinery", "_replaced", "_tests_of", "_foreign_tests", "_failed_import"):
        noted["runner " + name] = _identity(globals().get(name))
    noted["sys.meta_path"] = tuple(map(id, sys.meta_path))
    noted["sys.path_hooks"] = tuple(map(id, sys.path_hooks))
    noted["sys.gettrace"] = id(sys.gettrace())
    noted["sys.getprofile"] = id(sys.getprofile())
    noted["sys.excepthook"] = id(sys.excepthook)
    return noted


def _replaced(before):
    # Changed, removed, or added (a __getattribute__ put on TestCase is new, not changed).
    after = _verdict_machinery()
    return sorted(name for name in before.keys() | after.keys() if before.get(name, "data") != after.get(name, "data"))


def _tests_of(suite):
    found, pending = [], [suite]
    while pending:
        item = pending.pop()
        if isinstance(item, unittest.TestSuite):
            pending.extend(item)
        elif item is not None:
            found.append(item)
    return found


_failed_import = unittest.loader._FailedTest


def _foreign_tests(tests, directory):
    # A test method whose code was not compiled from a file of the test directory was put
    # there by something else (unittest's own stand-in for a module that failed to import
    # reports an error anyway).
    foreign = []
    for test in tests:
        if type(test) is _failed_import:
            continue
        method = getattr(type(test), getattr(test, "_testMethodName", ""), None)
        code = getattr(method, "__code__", None)
        origin = os.path.realpath(code.co_filename) if code is not None else ""
        if not origin.startswith(directory + os.sep):
            foreign.append(test.id())
    return sorted(foreign)


_noted = _verdict_machinery()
_directory = os.path.realpath(ARGUMENTS.get("directory", "tests"))
sys.path.append(ROOT)
suite = unittest.defaultTestLoader.discover(ARGUMENTS.get("directory", "tests"), top_level_dir=ROOT)
tests = _tests_of(suite)  # the suite lets go of each test once it ran
report = io.StringIO()
result = unittest.TextTestRunner(stream=report, verbosity=1, resultclass=_Recorder).run(suite)
tampered = _replaced(_noted) + ["test method " + test for test in _foreign_tests(tests, _directory)]
emit(clean(report.getvalue()))
if tampered:
    emit("the test runner was tampered with: " + ", ".join(tampered[:5]))
K3_SEAL_PAYLOAD = _report(
    {"run": result.testsRun, "outcomes": result.outcomes, "tampered": tampered}, sort_keys=True
)
""",
}


# What each call brings back from the sandbox: its output, and the repository only for the
# tools that change it. run_tests and the hidden tests (the only ones that run the model's
# code) bring back nothing but their output.
_COLLECTED: Mapping[str, tuple[str, ...]] = {
    "list_files": (OUTPUT_FILE,),
    "read_file": (OUTPUT_FILE,),
    "write_file": (REPO_DIR, OUTPUT_FILE),
    "edit_file": (REPO_DIR, OUTPUT_FILE),
    "run_tests": (OUTPUT_FILE,),
    shell_tools.SHELL: (REPO_DIR, OUTPUT_FILE),
    shell_tools.EDITOR: (REPO_DIR, OUTPUT_FILE),
}


@dataclass(frozen=True)
class RunReport:
    """What the runner reported of one test run: how many tests it ran and each one's outcome
    ("passed", "failed", "error", "skipped", ...), by unittest id."""

    run: int
    outcomes: Mapping[str, str]
    # What the runner found replaced after the run (its classes, hooks, the test methods'
    # origin); a report with anything here proves nothing.
    tampered: tuple[str, ...] = ()

    @property
    def passed(self) -> frozenset[str]:
        return frozenset(test for test, outcome in self.outcomes.items() if outcome == "passed")

    @property
    def not_passed(self) -> dict[str, str]:
        return {test: outcome for test, outcome in sorted(self.outcomes.items()) if outcome != "passed"}

    @property
    def all_passed(self) -> bool:
        return self.run > 0 and bool(self.outcomes) and not self.not_passed and not self.tampered


@dataclass(frozen=True)
class HiddenTests:
    """The score of a task: solved only when every hidden test is reported as run and passed."""

    passed: bool
    reason: str  # "passed", or why not
    report: RunReport | None


def run_report(execution: ExecutionResult) -> RunReport | None:
    """The runner's report, when the run reached its end (the sandbox's seal); None otherwise."""
    if execution.sealed is None:
        return None
    try:
        data = json.loads(execution.sealed)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    run, outcomes, tampered = data.get("run"), data.get("outcomes"), data.get("tampered")
    if not isinstance(run, int) or not isinstance(outcomes, dict) or not isinstance(tampered, list):
        return None
    if not all(isinstance(test, str) and isinstance(outcome, str) for test, outcome in outcomes.items()):
        return None
    if not all(isinstance(name, str) for name in tampered):
        return None
    return RunReport(run, dict(outcomes), tuple(tampered))


def hidden_test_ids(hidden: Mapping[str, str]) -> frozenset[str]:
    """The unittest ids the hidden tests define (test* methods of the classes in test*.py),
    as discovery from the repository root names them."""
    ids: set[str] = set()
    for path, text in hidden.items():
        if not fnmatch.fnmatch(posixpath.basename(path), "test*.py"):
            continue
        module = path.removesuffix(".py").replace("/", ".")
        for node in ast.parse(text).body:
            if isinstance(node, ast.ClassDef):
                ids.update(
                    f"{module}.{node.name}.{item.name}"
                    for item in node.body
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test")
                )
    return frozenset(ids)


def judge_hidden(execution: ExecutionResult, expected: frozenset[str]) -> HiddenTests:
    """Solved iff the runner's sealed report has every expected hidden test as passed and
    nothing that did not pass; an exit status never decides."""
    report = run_report(execution)
    if report is None:
        reason = execution.reason if not execution.passed else "no test report"
        return HiddenTests(False, reason, None)
    if report.tampered:
        listed = ", ".join(report.tampered[:3])
        return HiddenTests(False, f"the test runner was tampered with ({len(report.tampered)}): {listed}", report)
    not_passed = report.not_passed
    missing = sorted(expected - report.passed)
    if not_passed:
        listed = ", ".join(f"{test} {outcome}" for test, outcome in list(not_passed.items())[:3])
        return HiddenTests(False, f"{len(not_passed)} of {report.run} hidden tests did not pass: {listed}", report)
    if missing or not report.all_passed:
        listed = ", ".join(missing[:3])
        return HiddenTests(False, f"{len(missing)} hidden tests not reported as passed: {listed}", report)
    return HiddenTests(True, "passed", report)


# The tools whose run is a function of the repository and the call (file operations, the test
# runner): with a memo, an identical call on an identical repository reuses the earlier run
# (sandbox/memo.py). The shell is not among them: a command may read the clock or count its calls.
REPEATABLE_TOOLS = frozenset({"list_files", "read_file", "write_file", "edit_file", "run_tests", shell_tools.EDITOR})


class Workspace:
    """One task's repository between tool calls; every operation goes through the sandbox."""

    def __init__(self, files: Mapping[str, str], pool: SandboxPool, memo: ProgramMemo | None = None) -> None:
        self.files: dict[str, str] = dict(files)
        self._pool = pool
        self._memo = memo

    async def _execute(
        self,
        program: str,
        limits: SandboxLimits,
        files: Mapping[str, str],
        collect: Collect,
        *,
        seal: bool,
        repeatable: bool,
    ) -> ExecutionResult:
        if repeatable and self._memo is not None:
            return (await self._memo.run(program, limits, files=files, collect=collect, seal=seal)).result
        return await self._pool.run(program, limits, files=files, collect=collect, seal=seal)

    async def call(self, name: str, arguments: Mapping[str, Any], *, wall_seconds: float | None = None) -> ToolResult:
        """Run one valid call (declared name, arguments that fit its schema), for at most
        `wall_seconds` when that is less than the tools' own limit (the task's time left)."""
        if "path" in arguments:
            problem = path_problem(arguments["path"])
            if problem is not None:
                return ToolResult(f"error: {problem}", ok=False, refused="path outside the repository")
        limits = TOOL_LIMITS
        if wall_seconds is not None and wall_seconds < TOOL_LIMITS.wall_seconds:
            limits = dataclasses.replace(TOOL_LIMITS, wall_seconds=max(wall_seconds, 0.1))
        execution = await self._run(name, arguments, self.files, limits)
        if name in CHANGES_FILES and execution.passed:
            if execution.files is None:
                return ToolResult(f"error: the change was not kept: {execution.collect_problem}", ok=False)
            self.files = {
                path.removeprefix(f"{REPO_DIR}/"): text
                for path, text in execution.files.items()
                if path.startswith(f"{REPO_DIR}/")
            }
        ok = execution.passed
        if name == "run_tests":
            report = run_report(execution)
            ok = report is not None and report.all_passed
        return ToolResult(_result_text(name, execution), ok=ok)

    async def hidden_tests(self, hidden: Mapping[str, str], select: Sequence[str] = ()) -> HiddenTests:
        """The score: the hidden tests run against the repository as the agent left it, in a
        process that never imports the repository (agent/verdict.py); with `select`, only those
        tests run and every one of them must pass."""
        program = hidden_verdict_program(hidden, HIDDEN_DIR, repository_packages(self.files), select)
        copy = {f"{REPO_DIR}/{path}": text for path, text in self.files.items()}
        execution = await self._execute(program, TOOL_LIMITS, copy, (OUTPUT_FILE,), seal=True, repeatable=True)
        return judge_hidden(execution, frozenset(select) or hidden_test_ids(hidden))

    async def _run(
        self, name: str, arguments: Mapping[str, Any], files: Mapping[str, str], limits: SandboxLimits = TOOL_LIMITS
    ) -> ExecutionResult:
        program = _PRELUDE % json.dumps(dict(arguments)) + _PROGRAMS[name]
        copy = {f"{REPO_DIR}/{path}": text for path, text in files.items()}
        return await self._execute(
            program, limits, copy, _COLLECTED[name], seal=name == "run_tests", repeatable=name in REPEATABLE_TOOLS
        )


def tool_output(execution: ExecutionResult) -> str:
    """What the tool program wrote for the model (whole, unlike the excerpts of stdout)."""
    return (execution.files or {}).get(OUTPUT_FILE, "")


def _result_text(name: str, execution: ExecutionResult) -> str:
    output = tool_output(execution)
    if name == "run_tests":
        report = run_report(execution)
        if report is None:
            status = f"tests failed ({execution.reason if not execution.passed else 'no test report'})"
        elif report.tampered:
            status = "tests failed (the test runner was tampered with)"
        elif report.all_passed:
            status = "tests passed"
        elif report.run == 0:
            status = "tests failed (no test ran)"
        else:
            status = f"tests failed ({len(report.not_passed)} of {report.run} did not pass)"
        text = f"{status}\n{output}"
    elif execution.passed:
        # A file comes back exactly as it is; a message loses its final newline.
        text = output if name == "read_file" else output.removesuffix("\n")
    else:
        text = output.removesuffix("\n") if output.startswith("error:") else f"error: {execution.reason}\n{output}"
    return text if len(text) <= RESULT_CHARS else text[:RESULT_CHARS] + "\n[… cut: the result is longer]"
