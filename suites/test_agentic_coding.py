"""Long-output agentic coding: the model works on a small Python repository through tools
(list, read, write and edit files, run the tests, finish) for as many turns as it needs,
and hidden tests score what it leaves. 60 authored tasks (`fixtures/agentic_coding/`: bug fixes,
features across two files, refactors, whole modules written from their docstrings), and bugs
put into real PyPI projects, decided by the projects' own tests (`fixtures/pools/swe_mutants/`:
a sample by default, the whole pool with `-m agentic_pool`).

This is where the published K3 regression showed (EP32 with a fused MoE kernel: outputs
past tens of thousands of tokens loop until the limit): long outputs and growing contexts.
The loop and its tools: `k3conformance/agent/`; every tool call runs in the sandbox (only
with bubblewrap's filesystem isolation, unless --k3-agent-unisolated). An accuracy suite:
an unsolved task is a data point for the gate; the tool-call checks inside the loop are
conformance checks (`k3conformance/checks/agentic_coding.py`).
"""

from __future__ import annotations

from functools import lru_cache

import pytest
from _pytest.mark.structures import ParameterSet

from k3conformance import Exchange, ItemScore, Probe, ProbeResult, Settings, settings_of
from k3conformance.agent.isolation import agent_isolation
from k3conformance.agent.loop import AgentBudget, AgentRun, TurnAsk, run_agent
from k3conformance.agent.pool_tasks import load_pool_tasks, pool_dir
from k3conformance.agent.swebench import Refused, load_instances
from k3conformance.agent.tasks import AgentTask, TaskSet, load_tasks
from k3conformance.agent.tools import TOOLSETS, Workspace
from k3conformance.checks.agentic_coding import check_tool_calls_conform
from k3conformance.sandbox import SandboxPool
from k3conformance.sandbox.memo import ProgramMemo

SUITE = "agentic_coding"
MAX_TOKENS = 65536
# The real-repository pool (fixtures/pools/swe_mutants/): its first POOL_SAMPLE tasks (the
# pool's order spans its projects) run by default; all of them with `-m agentic_pool`.
POOL_SAMPLE = 12
POOL_MARK = "agentic_pool"


@lru_cache(maxsize=1)
def sandbox_pool() -> SandboxPool:
    return SandboxPool()


@lru_cache(maxsize=1)
def program_memo() -> ProgramMemo:
    """A file tool or test run repeated on an identical repository runs once (sandbox/memo.py)."""
    return ProgramMemo(sandbox_pool())


def _probe(tasks: TaskSet, task: AgentTask | Refused) -> Probe:
    async def conversation(exchange: Exchange) -> None:
        settings = exchange.settings
        if isinstance(task, Refused):
            exchange.note("refused", f"instance {task.instance_id} refused: {task.reason}")
            return
        isolation = agent_isolation(settings.agent_unisolated)
        if not isolation.allowed:
            exchange.note("refused", isolation.refusal())
            return
        budget = AgentBudget(
            turns=settings.agent_turns,
            output_tokens=settings.agent_tokens,
            wall_seconds=settings.agent_wall_time,
            max_tokens_per_turn=settings.max_tokens or MAX_TOKENS,
        )
        toolset = TOOLSETS[settings.agent_tools]
        workspace = Workspace(task.start, sandbox_pool(), program_memo())
        ask = TurnAsk(settings.agent_tool_choice, settings.agent_thinking, settings.think_mode)
        exchange.note("agent", await run_agent(exchange, task, workspace, budget, toolset, ask))

    if isinstance(task, Refused):
        return Probe(SUITE, task.instance_id, conversation=conversation, max_tokens=MAX_TOKENS, kind="bugfix",
                     data={"dataset": tasks.name, "dataset_sha256": tasks.sha256})  # fmt: skip
    return Probe(
        SUITE,
        task.id,
        conversation=conversation,
        max_tokens=MAX_TOKENS,
        # Long-output kinds are where a broken kernel loops: a limited run keeps every kind, and
        # the sequential gate's committed order holds every kind in proportion at every look.
        kind=task.kind,
        data={"dataset": tasks.name, "dataset_sha256": tasks.sha256, "item_sha256": task.content_sha256()},
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "probe" in metafunc.fixturenames:
        limit = settings_of(metafunc.config).limit
        tasks = load_tasks()
        probes: list[Probe | ParameterSet] = [_probe(tasks, task) for task in tasks.tasks[:limit]]
        # `--k3-limit N` takes the first N of the authored tasks, then of the pool's.
        left = None if limit is None else max(0, limit - len(tasks.tasks))
        if pool_dir().is_dir() and left != 0:
            pool, _ = load_pool_tasks()
            whole = POOL_MARK in str(metafunc.config.getoption("markexpr", "") or "")
            chosen = pool.tasks if whole else pool.tasks[:POOL_SAMPLE]
            marks = [getattr(pytest.mark, POOL_MARK)] if whole else []
            probes += [pytest.param(_probe(pool, task), marks=marks, id=task.id) for task in chosen[:left]]
        for spec in settings_of(metafunc.config).agent_instances:
            name, revision, instances = load_instances(spec, limit)
            given = TaskSet(name, revision, tuple(task for task in instances if isinstance(task, AgentTask)))
            probes += [_probe(given, task) for task in instances]
        metafunc.parametrize("probe", probes, ids=str)


def _runs(k3_result: ProbeResult) -> list[tuple[int, AgentRun]]:
    runs = []
    for sample in k3_result.samples:
        if "refused" in sample.notes:
            pytest.skip(sample.notes["refused"])
        # A rejected request (4xx) fails here, as an api fault, before anything is scored.
        for step in sample.outcomes:
            k3_result.completion(step, sample.sample)
        runs.append((sample.sample, sample.notes["agent"]))
    return runs


def test_task_solved(probe: Probe, k3_result: ProbeResult, k3_score: ItemScore) -> None:
    for _, run in _runs(k3_result):
        k3_score.add(
            float(run.solved),
            answered=bool(run.turns),
            truncated=run.truncated,
            output_tokens=run.output_tokens,
            looping=run.looping,
            loop_kinds=run.loop_kinds,
            outcome=run.hidden_tests,
            agent=run.to_record(),
        )


def test_tool_calls_conform(probe: Probe, k3_result: ProbeResult, k3_settings: Settings) -> None:
    offered = TOOLSETS[k3_settings.agent_tools].by_name
    for sample, run in _runs(k3_result):
        check_tool_calls_conform([k3_result.completion(step, sample) for step in run.steps], offered)
