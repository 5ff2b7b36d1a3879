"""The reference deployment playing the coding agent: a scripted solution path per task.

A request is an agent turn when it declares the agent's tools and its first user message
names a task of `fixtures/agentic_coding/` or of the real-repository pool ("Task ID"). The script is what a competent
agent does: list the files, read the ones it will change and the visible tests, make the
change (an `edit_file` of one function for a bug fix, a `write_file` of each whole file
otherwise), run the tests, finish. Which step comes next is the number of assistant turns
already in the history, so a conversation replays identically.

Whether the change is right is drawn once per (task, seed) at the profile's accuracy (as
the other suites' answers are); a wrong change is a plausible no-op (a comment on the
function, the old file written back), so the hidden tests fail for a reason in the files.

Thinking grows with the work: a turn that writes code first drafts, reviews and revises it
in its reasoning (`_DRAFTS` times the code's length) on top of the effort's usual share. That is what makes a long-output turn long,
and only the length of outputs and contexts decides where a faulty kernel loops
(`faults.falls_into_loop`): this module knows nothing of faults.
"""

from __future__ import annotations

import ast
import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from k3conformance.agent.pool_tasks import load_pool_tasks, pool_dir
from k3conformance.agent.tasks import AgentTask, load_tasks
from k3conformance.reference.values import ChatRequest
from k3conformance.reference.words import count_tokens

AGENT_TOOLS = frozenset({"list_files", "read_file", "write_file", "edit_file", "run_tests", "finish"})
# The open agents' set (`--k3-agent-tools shell`): the same script, every step through these.
SHELL_TOOLS = frozenset({"bash", "str_replace_editor", "finish"})
_TASK_LINE = re.compile(r"^Task (\S+)$", re.MULTILINE)
# A reasoning model drafts the code it writes in its thinking, checks it and revises it.
_DRAFTS = 3
# Thinking of a turn, as a share of the effort's usual length, before any code it writes.
_THINKING_SHARE: Mapping[str, float] = {
    "list_files": 1.0,
    "read_file": 0.3,
    "edit_file": 0.5,
    "write_file": 0.5,
    "run_tests": 0.3,
    "finish": 0.2,
    "str_replace_editor": 0.5,
    "bash": 0.3,
}


@dataclass(frozen=True)
class AgentAction:
    name: str
    arguments: Mapping[str, Any]
    # Words of thinking before the call: the usual share plus drafts of the code it writes.
    thinking_words: int

    @property
    def arguments_json(self) -> str:
        return json.dumps(dict(self.arguments), ensure_ascii=False)


def agent_task(request: ChatRequest) -> AgentTask | None:
    """The task this request works on, when it is an agent turn."""
    offered = {tool.name for tool in request.tools}
    if not (offered >= AGENT_TOOLS or offered >= SHELL_TOOLS):
        return None
    first_user = next((message for message in request.messages if message.get("role") == "user"), None)
    content = first_user.get("content") if first_user else None
    match = _TASK_LINE.search(content) if isinstance(content, str) else None
    if match is None:
        return None
    return _tasks_by_id().get(match.group(1))


def next_action(request: ChatRequest, task: AgentTask, correct: bool, effort_words: int) -> AgentAction:
    """The script's step after the assistant turns already in the history (the last step,
    `finish`, again if the history is longer than the script)."""
    done = sum(1 for message in request.messages if message.get("role") == "assistant")
    script = _script(task, correct)
    name, arguments = script[min(done, len(script) - 1)]
    if not {tool.name for tool in request.tools} >= AGENT_TOOLS:
        name, arguments = _through_the_shell(task, name, arguments)
    written = sum(count_tokens(str(arguments.get(key, ""))) for key in ("content", "new", "new_str", "file_text"))
    return AgentAction(name, arguments, round(effort_words * _THINKING_SHARE[name]) + _DRAFTS * written)


def _script(task: AgentTask, correct: bool) -> list[tuple[str, Mapping[str, Any]]]:
    existing = [path for path in task.changed_paths() if path in task.start]
    tests = [task.visible_tests] if task.visible_tests in task.start and task.visible_tests not in existing else []
    reads = [*existing, *tests]
    steps: list[tuple[str, Mapping[str, Any]]] = [("list_files", {})]
    steps += [("read_file", {"path": path}) for path in reads]
    steps += _changes(task, correct)
    steps += [("run_tests", {}), ("finish", {"summary": f"Done with {task.id}."})]
    return steps


def _through_the_shell(task: AgentTask, name: str, arguments: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """A step of the script as an agent with only a shell and the editor takes it: it looks with
    `find` and `view`, writes a whole file by replacing its whole text (or creating it), and
    runs the tests itself."""
    if name == "list_files":
        return "bash", {"command": "find . -type f -not -path '*/.*' | sort"}
    if name == "read_file":
        return "str_replace_editor", {"command": "view", "path": arguments["path"]}
    if name == "edit_file":
        edit = {"old_str": arguments["old"], "new_str": arguments["new"]}
        return "str_replace_editor", {"command": "str_replace", "path": arguments["path"], **edit}
    if name == "write_file":
        path, text = arguments["path"], arguments["content"]
        if task.start.get(path):
            edit = {"old_str": task.start[path], "new_str": text}
            return "str_replace_editor", {"command": "str_replace", "path": path, **edit}
        return "str_replace_editor", {"command": "create", "path": path, "file_text": text}
    if name == "run_tests":
        return "bash", {"command": "python3 -m unittest discover -s tests -t . 2>&1 | tail -n 40"}
    return name, arguments


def _changes(task: AgentTask, correct: bool) -> list[tuple[str, Mapping[str, Any]]]:
    if task.hidden_ids:
        return [_function_rewrite(task, path, correct) for path in task.changed_paths()]
    if task.kind == "bugfix":
        (path,) = task.changed_paths()
        old, new = _changed_block(task.start[path], task.solution[path])
        if not correct:
            first, _, rest = old.partition("\n")
            new = f"{first}  # checked: looks right\n{rest}" if rest else f"{first}  # checked: looks right"
        return [("edit_file", {"path": path, "old": old, "new": new})]
    if correct:
        return [("write_file", {"path": path, "content": task.solution[path]}) for path in task.changed_paths()]
    # A wrong attempt rewrites the files it would change as they were.
    return [
        ("write_file", {"path": path, "content": task.start[path]})
        for path in task.changed_paths()
        if path in task.start
    ]


def _function_rewrite(task: AgentTask, path: str, correct: bool) -> tuple[str, Mapping[str, Any]]:
    """A task of a real project: the agent rewrites the whole function it found a bug in (one
    per file of the task), with the editor of the open coding agents (its drafts are as long as
    the function)."""
    # Keyed by the texts themselves (a string caches its hash), not by the task's id, which
    # a user's instance file may share with a bundled task.
    key = (task.start[path], task.solution[path])
    if key not in _rewrites:
        _rewrites[key] = _whole_function_edit(*key)
    old, new = _rewrites[key]
    if not correct:
        head, _, rest = old.partition("\n")
        new = f"{head}  # checked: looks right\n{rest}"
    return ("str_replace_editor", {"command": "str_replace", "path": path, "old_str": old, "new_str": new})


# Every turn of every sample replays the same edit; diffing and parsing a real module each time
# was a third of the simulator's time on the pool's tasks.
_rewrites: dict[tuple[str, str], tuple[str, str]] = {}


def _whole_function_edit(start: str, solution: str) -> tuple[str, str]:
    """The old and new text of the innermost function holding the change, where it occurs
    once; else the changed block itself."""
    old, new = _changed_block(start, solution)
    first = start[: start.index(old)].count("\n") + 1
    last = first + old.count("\n")
    spans = [
        (node.lineno, node.end_lineno or node.lineno)
        for node in ast.walk(ast.parse(start))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= first
        and (node.end_lineno or node.lineno) >= last
    ]  # fmt: skip
    if spans:
        low, high = max(spans)  # the innermost: it starts last
        lines = start.splitlines(keepends=True)
        whole = "".join(lines[low - 1 : high])
        if start.count(whole) == 1:
            old, new = whole, whole.replace(old, new, 1)
    return old, new


def _changed_block(start: str, solution: str) -> tuple[str, str]:
    """The lines that differ, with one line of context on each side and more until the old
    text occurs only once: what an agent puts into an exact-match edit."""
    before, after = start.splitlines(), solution.splitlines()
    opcodes = [
        op for op in difflib.SequenceMatcher(a=before, b=after, autojunk=False).get_opcodes() if op[0] != "equal"
    ]
    low_a, high_a = opcodes[0][1], opcodes[-1][2]
    low_b, high_b = opcodes[0][3], opcodes[-1][4]
    for context in range(1, len(before) + 1):
        first_a, first_b = max(0, low_a - context), max(0, low_b - context)
        old = "\n".join(before[first_a : high_a + context])
        if start.count(old) == 1:
            return old, "\n".join(after[first_b : high_b + context])
    raise ValueError("no unique edit turns the start into the solution")


_cache: dict[str, AgentTask] = {}


def _tasks_by_id() -> Mapping[str, AgentTask]:
    if not _cache:
        _cache.update({task.id: task for task in load_tasks().tasks})
        # The real-repository pool's tasks are played the same way (its answer key: each
        # project's own code); a checkout without the pool has only the authored tasks.
        if pool_dir().is_dir():
            _cache.update({task.id: task for task in load_pool_tasks()[0].tasks})
    return _cache
