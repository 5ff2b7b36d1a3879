"""The reference deployment's scripted agent (reference/agent_play.py) with only the open coding
agents' tools (`--k3-agent-tools shell`): every step of its script goes through `bash` and
`str_replace_editor`, and its right answer, run in the real sandbox, solves the task as it does
with the suite's own tools."""

from __future__ import annotations

import asyncio
import json

import pytest

from k3conformance.agent.loop import task_prompt
from k3conformance.agent.pool_tasks import load_pool_tasks
from k3conformance.agent.tasks import AgentTask, load_tasks
from k3conformance.agent.tools import TOOLSETS, Workspace
from k3conformance.reference import agent_play
from k3conformance.reference.request import parse_request
from k3conformance.sandbox import SandboxPool

POOL = SandboxPool(2)
AUTHORED = load_tasks().tasks
# A bug fix (an exact edit), a feature (new and rewritten files) and a real project's task (the
# whole function rewritten): each way the script changes files.
TASKS = (
    next(task for task in AUTHORED if task.kind == "bugfix"),
    next(task for task in AUTHORED if task.kind == "feature"),
    load_pool_tasks()[1][0].task,
)


def _actions(task: AgentTask, toolset: str) -> list[agent_play.AgentAction]:
    """The script's steps, each asked for with the history so far (one assistant turn a step)."""
    actions: list[agent_play.AgentAction] = []
    messages: list[dict[str, object]] = [{"role": "user", "content": task_prompt(task)}]
    body = {"tools": list(TOOLSETS[toolset].specs)}
    while not actions or actions[-1].name != "finish":
        request = parse_request({**body, "messages": messages}, "kimi-k3")
        actions.append(agent_play.next_action(request, task, correct=True, effort_words=100))
        messages = [*messages, {"role": "assistant", "content": "step"}]
    return actions


@pytest.mark.parametrize("task", TASKS, ids=lambda task: task.id)
def test_the_script_runs_through_the_shell_and_solves_the_task(task: AgentTask) -> None:
    request = parse_request({"tools": list(TOOLSETS["shell"].specs), "messages": [
        {"role": "user", "content": task_prompt(task)}]}, "kimi-k3")  # fmt: skip
    assert agent_play.agent_task(request) == task
    actions = _actions(task, "shell")
    assert {action.name for action in actions} <= agent_play.SHELL_TOOLS
    assert len(actions) == len(_actions(task, "all"))
    workspace = Workspace(task.start, POOL)
    for action in actions[:-1]:
        result = asyncio.run(workspace.call(action.name, action.arguments))
        assert result.ok and not result.text.startswith("error"), (
            action.name,
            json.dumps(action.arguments)[:300],
            result.text,
        )
    solved = asyncio.run(workspace.hidden_tests(task.hidden, task.hidden_ids))
    assert solved.passed, solved.reason
