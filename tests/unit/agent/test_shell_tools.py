"""The shell and the string-replacement editor (issue 33), as the open coding agents expose
them: they run in the sandbox on the task's copy, keep what they change, hold their time and
output limits, and reach nothing of the host."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from k3conformance.agent.shell_tools import SHELL_OUTPUT_CHARS
from k3conformance.agent.tasks import load_tasks
from k3conformance.agent.tools import TOOLS_BY_NAME, ToolResult, Workspace
from k3conformance.sandbox import SandboxPool

POOL = SandboxPool(1)
TASK = load_tasks().tasks[0]


def call(workspace: Workspace, name: str, **arguments: Any) -> ToolResult:
    return asyncio.run(workspace.call(name, arguments))


def test_the_shell_runs_in_the_copy_keeps_its_changes_and_holds_its_limits(monkeypatch: Any) -> None:
    monkeypatch.setenv("K3_API_KEY", "sk-shell-canary")
    workspace = Workspace(TASK.start, POOL)
    result = call(workspace, "bash", command="echo made > made.txt && python3 -c 'print(6 * 7)' && env")
    assert result.ok and "42" in result.text and result.text.endswith("[exit status 0]"), result.text
    assert "sk-shell-canary" not in result.text and os.getcwd() not in result.text
    assert workspace.files["made.txt"] == "made\n"
    assert call(workspace, "bash", command="exit 3").text == "[exit status 3]"
    assert call(workspace, "bash", command="sleep 10", timeout=1).text == "[timed out after 1 s]"
    long = call(workspace, "bash", command="python3 -c \"print('x' * 50000)\"").text
    assert len(long) < SHELL_OUTPUT_CHARS + 200 and "characters cut" in long
    host = call(workspace, "bash", command=f"ls {os.getcwd()} /root 2>&1; cat /proc/1/environ 2>&1 | head -c 200").text
    assert "No such file" in host and "sk-shell-canary" not in host


def test_the_editor_views_creates_replaces_and_inserts() -> None:
    workspace = Workspace(TASK.start, POOL)
    path = TASK.changed_paths()[0]
    view = call(workspace, "str_replace_editor", command="view", path=path, view_range=[1, 2]).text
    assert view.startswith("     1\t") and view.count("\n") == 1
    assert call(workspace, "str_replace_editor", command="create", path="notes/a.txt", file_text="one\ntwo").ok
    assert not call(workspace, "str_replace_editor", command="create", path="notes/a.txt", file_text="x").ok
    edited = call(
        workspace, "str_replace_editor", command="str_replace", path="notes/a.txt", old_str="two", new_str="2"
    )
    assert edited.ok and "     2\t2" in edited.text
    assert call(workspace, "str_replace_editor", command="insert", path="notes/a.txt", insert_line=0, new_str="zero").ok
    assert workspace.files["notes/a.txt"] == "zero\none\n2"
    twice = call(workspace, "str_replace_editor", command="str_replace", path=path, old_str="def ", new_str="def  ")
    assert not twice.ok and "must occur exactly once" in twice.text
    outside = call(workspace, "str_replace_editor", command="view", path="../../etc/passwd")
    assert outside.refused == "path outside the repository"
    assert {"bash", "str_replace_editor"} <= set(TOOLS_BY_NAME)
