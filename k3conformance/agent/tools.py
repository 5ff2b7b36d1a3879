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

import json
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from k3conformance.agent.tasks import HIDDEN_DIR
from k3conformance.sandbox import ExecutionResult, SandboxLimits, SandboxPool

REPO_DIR = "repo"
OUTPUT_FILE = "tool-output.txt"
# What one tool result may put into the conversation; more is cut with a note.
RESULT_CHARS = 20_000
TOOL_LIMITS = SandboxLimits(cpu_seconds=20, wall_seconds=30)
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
    _function(
        FINISH,
        "Stop: the task is done (or cannot be done). The hidden tests then decide.",
        {"summary": {"type": "string", "description": "What was changed and why"}},
        ["summary"],
    ),
)
TOOLS_BY_NAME: Mapping[str, dict[str, Any]] = {spec["function"]["name"]: spec for spec in TOOL_SPECS}
CHANGES_FILES = frozenset({"write_file", "edit_file"})


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
sys.path.insert(0, ROOT)


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
    "run_tests": r"""
import io, unittest
suite = unittest.defaultTestLoader.discover(ARGUMENTS.get("directory", "tests"), top_level_dir=ROOT)
report = io.StringIO()
result = unittest.TextTestRunner(stream=report, verbosity=1).run(suite)
emit(clean(report.getvalue()))
sys.exit(0 if result.wasSuccessful() and result.testsRun else 1)
""",
}


class Workspace:
    """One task's repository between tool calls; every operation goes through the sandbox."""

    def __init__(self, files: Mapping[str, str], pool: SandboxPool) -> None:
        self.files: dict[str, str] = dict(files)
        self._pool = pool

    async def call(self, name: str, arguments: Mapping[str, Any]) -> ToolResult:
        """Run one valid call (declared name, arguments that fit its schema)."""
        if "path" in arguments:
            problem = path_problem(arguments["path"])
            if problem is not None:
                return ToolResult(f"error: {problem}", ok=False, refused="path outside the repository")
        execution = await self._run(name, arguments, self.files)
        if name in CHANGES_FILES and execution.files is not None and execution.passed:
            self.files = {
                path.removeprefix(f"{REPO_DIR}/"): text
                for path, text in execution.files.items()
                if path.startswith(f"{REPO_DIR}/")
            }
        return ToolResult(_result_text(name, execution), ok=execution.passed)

    async def hidden_tests(self, hidden: Mapping[str, str]) -> ExecutionResult:
        """The score: the hidden tests run against the repository as the agent left it."""
        return await self._run("run_tests", {"directory": HIDDEN_DIR}, {**self.files, **hidden})

    async def _run(self, name: str, arguments: Mapping[str, Any], files: Mapping[str, str]) -> ExecutionResult:
        program = _PRELUDE % json.dumps(dict(arguments)) + _PROGRAMS[name]
        copy = {f"{REPO_DIR}/{path}": text for path, text in files.items()}
        return await self._pool.run(program, TOOL_LIMITS, files=copy, collect=True)


def tool_output(execution: ExecutionResult) -> str:
    """What the tool program wrote for the model (whole, unlike the excerpts of stdout)."""
    return (execution.files or {}).get(OUTPUT_FILE, "")


def _result_text(name: str, execution: ExecutionResult) -> str:
    output = tool_output(execution)
    if name == "run_tests":
        status = "tests passed" if execution.passed else f"tests failed ({execution.reason})"
        text = f"{status}\n{output}"
    elif execution.passed:
        # A file comes back exactly as it is; a message loses its final newline.
        text = output if name == "read_file" else output.removesuffix("\n")
    else:
        text = output.removesuffix("\n") if output.startswith("error:") else f"error: {execution.reason}\n{output}"
    return text if len(text) <= RESULT_CHARS else text[:RESULT_CHARS] + "\n[… cut: the result is longer]"
