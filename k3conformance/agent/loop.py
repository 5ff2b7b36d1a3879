"""The agent loop: one task, one conversation, the model's tool calls run in the sandbox.

Each turn is one request through the probe's `Exchange` (so the same client, retries,
records and resume as every other probe), streamed, with the whole history: earlier
answers go back with their reasoning (K3 keeps all thinking) and every tool result goes
back as a tool message with its `tool_call_id`. The loop stops at `finish`, at the turn
limit, when the task's output-token budget or wall time is spent (checked before every
tool call too, and no call may run past it), when the next request would be larger than
the budget's `request_bytes`, when a turn repeats
the previous turn's action exactly, after two turns in a row without a tool call, when
an output is cut at its budget (`length`: a looping model never stops by itself), or when
a request fails. A turn runs at most `calls_per_turn` calls; the rest get an error back
without running. The hidden tests then score the repository as the agent left it.

A resumed run replays the conversation: finished turns come back from the records (their
request bodies match, since every tool result is deterministic) and only the rest is sent.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from k3conformance.agent.tasks import AgentTask
from k3conformance.agent.tools import FINISH, TOOLSETS, Toolset, Workspace
from k3conformance.endpoint.completion import Completion
from k3conformance.probes.probe import Exchange
from k3conformance.probes.request_body import thinking_fields
from k3conformance.scoring.call_matching import parse_arguments, schema_errors
from k3conformance.scoring.repetition import judge_output
from k3conformance.xtml.markup import find_markup

NUDGE = "Continue with the tools: change the files, run the tests, and call finish when the task is done."
# Two turns in a row without a tool call end the task: the model is not working on it.
IDLE_TURNS = 2
# Budgets inside a turn (issue 25): a turn may hold any number of calls, each up to the
# tools' wall limit, and every result goes into the next request. Sixteen calls of up to
# RESULT_CHARS each keep one turn's results near 320 KB; 4 MiB holds a full K3 context.
CALLS_PER_TURN = 16
REQUEST_BYTES = 4 << 20


@dataclass(frozen=True)
class AgentBudget:
    turns: int
    output_tokens: int
    wall_seconds: float
    # Per request; a turn never asks for more than the task has left.
    max_tokens_per_turn: int
    calls_per_turn: int = CALLS_PER_TURN
    # The largest request body the loop sends (JSON bytes); a larger one ends the task.
    request_bytes: int = REQUEST_BYTES


@dataclass(frozen=True)
class TurnAsk:
    """What every turn's request asks beyond the conversation and the tools
    (`--k3-agent-tool-choice`, `--k3-agent-thinking`)."""

    # "auto" is not sent: the body stays what it was before the option existed.
    tool_choice: str = "auto"
    thinking: bool = True
    # The form thinking is switched off in (--k3-think-mode).
    think_mode: str = "opensource"

    def fields(self) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        if self.tool_choice != "auto":
            fields["tool_choice"] = self.tool_choice
        if not self.thinking:
            # Replaces the plugin's thinking parameters (request_body.build_body applies the probe's last).
            fields.update(thinking_fields(self.think_mode, enabled=False))
        return fields


@dataclass
class TurnRecord:
    turn: int
    step: str
    finish_reason: str | None
    prompt_tokens: int | None
    output_tokens: int | None
    tool_calls: list[str]
    # Problems with this turn's calls: {"kind": "bad JSON" | "unknown tool" | "schema
    # violation" | "markup in content", "detail": ...}
    invalid: list[dict[str, str]]
    refused: list[str]
    looping: bool
    # Where the loop was found: "reasoning", "content" or "joined"; None when none.
    looping_part: str | None = None
    # The kind of that loop ("short-token", "block", "counter"), and whether the output got out of it.
    loop_kind: str | None = None
    loop_escaped: bool = False


@dataclass
class AgentRun:
    task: str
    kind: str
    difficulty: int
    turns: list[TurnRecord] = field(default_factory=list)
    stop_reason: str = ""
    solved: bool = False
    hidden_tests: str = ""
    tool_calls: Counter[str] = field(default_factory=Counter)
    invalid_calls: Counter[str] = field(default_factory=Counter)

    @property
    def steps(self) -> list[str]:
        return [turn.step for turn in self.turns]

    @property
    def largest_context(self) -> int:
        """Prompt plus output tokens of the largest turn, as the server counted them."""
        return max(((turn.prompt_tokens or 0) + (turn.output_tokens or 0) for turn in self.turns), default=0)

    @property
    def output_tokens(self) -> int:
        return sum(turn.output_tokens or 0 for turn in self.turns)

    @property
    def truncated(self) -> bool:
        return any(turn.finish_reason == "length" for turn in self.turns)

    @property
    def looping(self) -> bool:
        return any(turn.looping for turn in self.turns)

    @property
    def loop_kinds(self) -> tuple[str, ...]:
        """The run's loop as `ItemScore.loop_kinds` counts a looping sample: the kind of its first
        looping turn, and "escaped" when that turn got out of its loop."""
        first = next((turn for turn in self.turns if turn.looping), None)
        if first is None or first.loop_kind is None:
            return ()
        return (first.loop_kind, "escaped") if first.loop_escaped else (first.loop_kind,)

    def to_record(self) -> dict[str, Any]:
        record = asdict(self)
        record.update(
            tool_calls=dict(sorted(self.tool_calls.items())),
            invalid_calls=dict(sorted(self.invalid_calls.items())),
            largest_context=self.largest_context,
            output_tokens=self.output_tokens,
            truncated=self.truncated,
            looping=self.looping,
            looping_turns=[turn.turn for turn in self.turns if turn.looping],
        )
        return record


def turn_step(turn: int) -> str:
    return f"turn-{turn:03d}"


async def run_agent(
    exchange: Exchange,
    task: AgentTask,
    workspace: Workspace,
    budget: AgentBudget,
    toolset: Toolset = TOOLSETS["all"],
    ask: TurnAsk = TurnAsk(),
) -> AgentRun:
    run = AgentRun(task.id, task.kind, task.difficulty)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": toolset.system_prompt},
        {"role": "user", "content": task_prompt(task)},
    ]
    started = time.monotonic()
    previous_action: str | None = None
    idle = 0
    run.stop_reason = "turn limit"
    for turn in range(1, budget.turns + 1):
        left = budget.output_tokens - run.output_tokens
        if left <= 0:
            run.stop_reason = "token budget"
            break
        if time.monotonic() - started > budget.wall_seconds:
            run.stop_reason = "wall time"
            break
        step = turn_step(turn)
        body = {
            "messages": messages,
            "tools": list(toolset.specs),
            "stream": True,
            "max_tokens": min(budget.max_tokens_per_turn, left),
            **ask.fields(),
        }
        if len(json.dumps(body, ensure_ascii=False).encode()) > budget.request_bytes:
            run.stop_reason = "request size"
            break
        outcome = await exchange.send(step, body)
        if not isinstance(outcome, Completion):
            run.stop_reason = "request failed"
            break
        record = _turn_record(turn, step, outcome, toolset)
        run.turns.append(record)
        run.tool_calls.update(record.tool_calls)
        run.invalid_calls.update(problem["kind"] for problem in record.invalid)
        if outcome.finish_reason == "length":
            run.stop_reason = "truncated"
            break
        calls = outcome.tool_calls or []
        if not calls:
            idle += 1
            if idle >= IDLE_TURNS:
                run.stop_reason = "no tool call"
                break
            messages = [*messages, outcome.as_history_message(), {"role": "user", "content": NUDGE}]
            continue
        idle = 0
        action = json.dumps([[call["function"].get("name"), call["function"].get("arguments")] for call in calls])
        if action == previous_action:
            run.stop_reason = "repeated action"
            break
        previous_action = action
        deadline = started + budget.wall_seconds
        results, finished, out_of_time = await _execute_calls(calls, workspace, record, budget, deadline, toolset)
        messages = [*messages, outcome.as_history_message(), *results]
        if finished:
            run.stop_reason = "finished"
            break
        if out_of_time:
            run.stop_reason = "wall time"
            break
    hidden = await workspace.hidden_tests(task.hidden, task.hidden_ids)
    run.solved = hidden.passed
    run.hidden_tests = hidden.reason
    return run


def task_prompt(task: AgentTask) -> str:
    return f"Task {task.id}\n\n{task.statement}\n\nThe repository's visible tests are in tests/."


async def _execute_calls(
    calls: list[dict[str, Any]],
    workspace: Workspace,
    record: TurnRecord,
    budget: AgentBudget,
    deadline: float,
    toolset: Toolset,
) -> tuple[list[dict[str, Any]], bool, bool]:
    """Tool messages for every call, in order; invalid calls, calls past `calls_per_turn`
    and calls once the wall time is spent get an error message back without running.
    Returns the messages, whether `finish` was called, and whether the wall time ran out."""
    results: list[dict[str, Any]] = []
    finished = out_of_time = False
    for index, call in enumerate(calls):
        name = str(call["function"].get("name"))
        arguments, problem = _valid_arguments(name, call["function"].get("arguments"), toolset)
        left = deadline - time.monotonic()
        if arguments is None:
            text = f"error: {problem}"
        elif index >= budget.calls_per_turn:
            text = f"error: not run: at most {budget.calls_per_turn} tool calls run in one turn"
            record.refused.append("calls per turn")
        elif name == FINISH:
            finished = True
            text = "finished"
        elif left <= 0:
            text = "error: not run: the task's wall time is spent"
            record.refused.append("wall time")
            out_of_time = True
        else:
            result = await workspace.call(name, arguments, wall_seconds=left)
            if result.refused is not None:
                record.refused.append(result.refused)
            text = result.text
        results.append({"role": "tool", "tool_call_id": call.get("id"), "content": text})
    return results, finished, out_of_time or time.monotonic() > deadline


def _valid_arguments(name: str, raw: Any, toolset: Toolset) -> tuple[dict[str, Any] | None, str]:
    # A tool of another toolset is unknown here: the model was not offered it.
    offered = toolset.by_name
    if name not in offered:
        return None, f"unknown tool {name!r}; the tools are {', '.join(offered)}"
    arguments, error = parse_arguments(raw)
    if arguments is None:
        return None, f"the arguments are not a JSON object: {error}"
    errors = schema_errors(offered[name]["function"]["parameters"], arguments)
    if errors:
        return None, f"the arguments do not fit the schema of {name}: {'; '.join(errors[:3])}"
    return arguments, ""


def _turn_record(turn: int, step: str, completion: Completion, toolset: Toolset) -> TurnRecord:
    usage = completion.usage or {}
    calls = completion.tool_calls or []
    invalid: list[dict[str, str]] = []
    for call in calls:
        name = str(call["function"].get("name"))
        arguments, problem = _valid_arguments(name, call["function"].get("arguments"), toolset)
        if arguments is None:
            kind = (
                "unknown tool"
                if name not in toolset.by_name
                else "bad JSON"
                if problem.startswith("the arguments are not")
                else "schema violation"
            )
            invalid.append({"kind": kind, "detail": problem})
    markup = find_markup(completion.content)
    if markup:
        invalid.append({"kind": "markup in content", "detail": ", ".join(markup)})
    reports = judge_output(completion.reasoning, completion.content)
    looping_part = next((part for part, report in reports.items() if report.looping), None)
    # As ItemScore.add_completion: the joined text sees every loop either part holds.
    loop = next(
        (reports[part] for part in ("combined", "reasoning", "content") if part in reports and reports[part].looping),
        None,
    )
    return TurnRecord(
        turn=turn,
        step=step,
        finish_reason=completion.finish_reason,
        prompt_tokens=usage.get("prompt_tokens"),
        output_tokens=usage.get("completion_tokens"),
        tool_calls=[str(call["function"].get("name")) for call in calls],
        invalid=invalid,
        refused=[],
        looping=looping_part is not None,
        looping_part=looping_part,
        loop_kind=loop.kind if loop is not None else None,
        loop_escaped=loop.escaped if loop is not None else False,
    )
