"""The reference deployment's accuracy profiles (a simulator): the published EP32 results of
sglang issue 40751, which only the gate's comparison with a tp8 baseline can catch. MegaMoE's
loops follow the length of the output and of the context, never the suite; decode context
parallelism's gibberish (vLLM issue 41623) follows the context alone."""

from __future__ import annotations

from functools import cache

import pytest
from run_files import REPO

from k3conformance.agent.loop import task_prompt
from k3conformance.agent.tasks import load_tasks
from k3conformance.agent.tools import TOOL_SPECS
from k3conformance.reference.agent_play import AGENT_TOOLS
from k3conformance.reference.answer_key import AnswerKey
from k3conformance.reference.faults import (
    DRIFT_CONTEXT_TOKENS,
    LOOP_CONTEXT_TOKENS,
    LOOP_OUTPUT_TOKENS,
    drift_onset,
    falls_into_loop,
    loop_risk,
)
from k3conformance.reference.profiles import get_profile, profiles_of_kind
from k3conformance.reference.simulator import Simulator
from k3conformance.reference.values import FixtureItem, SimulatedTurn
from k3conformance.scoring.repetition import detect

MODEL = "kimi-k3-simulator"
SEEDS = (1234, 1235)
CODING = frozenset({"coding", "humaneval-answer-key"})


@cache
def answer_key() -> AnswerKey:
    return AnswerKey.load(REPO / "fixtures")


def simulator(profile: str) -> Simulator:
    return Simulator(get_profile(profile), answer_key(), MODEL)


def items(suites: frozenset[str]) -> list[FixtureItem]:
    return [item for item in answer_key().items if item.suite in suites and item.graded]


def ask(profile: str, item: FixtureItem, seed: int, max_tokens: int = 4096) -> SimulatedTurn:
    body = {"messages": [{"role": "user", "content": item.prompt}], "seed": seed, "max_tokens": max_tokens}
    return simulator(profile).complete(body)


def share(predicate: list[bool]) -> float:
    return sum(predicate) / len(predicate)


def test_the_accuracy_profiles() -> None:
    assert profiles_of_kind("accuracy") == ["dcp-context-drift", "ep32-deepep", "ep32-megamoe", "numeric-drift"]


@pytest.mark.parametrize("profile", ["ep32-deepep", "ep32-megamoe", "dcp-context-drift", "numeric-drift"])
def test_correct_answers_are_a_subset_of_tp8s(profile: str) -> None:
    """Draws depend only on (item, seed): a pair of runs differs by the layout's loss alone."""
    for item in items(CODING | {"math"}):
        for seed in SEEDS:
            if simulator(profile).answers_correctly(item, seed):
                assert simulator("tp8").answers_correctly(item, seed), item.id


def test_loop_risk_follows_output_and_context_length_only() -> None:
    """No suite name anywhere: nothing below both onsets, certainty above either end."""
    (out_low, out_high), (context_low, context_high) = LOOP_OUTPUT_TOKENS, LOOP_CONTEXT_TOKENS
    assert loop_risk(out_low, context_low) == 0.0
    assert loop_risk(out_high, 0) == loop_risk(0, context_high) == 1.0
    assert 0.0 < loop_risk((out_low + out_high) // 2, 0) < 1.0
    assert 0.0 < loop_risk(0, 34_000) < 1.0
    assert not falls_into_loop(frozenset(), out_high * 10, context_high * 10, 0.0)


def test_megamoe_math_and_single_turn_coding_answer_like_tp8_because_they_are_short() -> None:
    """The authored math items' and HumanEval-sized answers stay under the output onset: identical to
    tp8's. The MATH pool's worked solutions (pool:math_hard) are real ones, some long enough to loop:
    the length, not the suite, decides."""
    for item in items(CODING | {"math"}):
        for seed in SEEDS:
            healthy = ask("tp8", item, seed)
            if healthy.completion_tokens < LOOP_OUTPUT_TOKENS[0]:
                assert ask("ep32-megamoe", item, seed) == healthy, item.id
    math = items(frozenset({"math"}))
    authored = [item for item in math if "/" not in item.id]
    assert len(authored) == 41
    assert all(ask("tp8", item, SEEDS[0]).completion_tokens < LOOP_OUTPUT_TOKENS[0] for item in authored)
    long_solutions = [item for item in math if ask("tp8", item, SEEDS[0]).completion_tokens >= LOOP_OUTPUT_TOKENS[0]]
    assert long_solutions and all(item.id.startswith("test/") for item in long_solutions)


def test_a_megamoe_loop_starts_healthy_and_runs_to_the_token_limit() -> None:
    """A prompt past the context onset: the answer loops until max_tokens."""
    filler = " ".join(f"word{i % 97}" for i in range(LOOP_CONTEXT_TOKENS[1]))
    body = {"messages": [{"role": "user", "content": f"{filler}\nWhat is 2 + 2?"}], "seed": 1, "max_tokens": 3000}
    looping = simulator("ep32-megamoe").complete(body)
    assert looping.finish_reason == "length" and looping.content == "" and looping.completion_tokens == 3000
    assert looping.reasoning.startswith("The user asks:")
    report = detect(looping.reasoning)
    assert report.looping and report.loop_repeats > 100
    assert simulator("tp8").complete(body).finish_reason == "stop"
    assert simulator("ep32-deepep").complete(body).finish_reason == "stop"


def test_megamoe_loops_on_agent_turns_that_write_whole_modules() -> None:
    """The scripted agent's write of a whole module is the long output that loops."""
    spec = next(task for task in load_tasks().tasks if task.kind == "spec")
    messages: list[dict[str, object]] = [{"role": "user", "content": task_prompt(spec)}]
    # The suite's own tools (the shell and editor beside them would draw other samples).
    tools = [tool for tool in TOOL_SPECS if tool["function"]["name"] in AGENT_TOOLS]
    outcomes = {}
    for profile in ("tp8", "ep32-megamoe", "ep32-deepep"):
        turns = []
        history = list(messages)
        for _ in range(8):
            completion = simulator(profile).complete(
                {"messages": history, "tools": tools, "seed": SEEDS[0], "max_tokens": 8192}
            )
            turns.append(completion)
            if completion.finish_reason != "tool_calls" or completion.tool_calls[0].name == "finish":
                break
            call = completion.tool_calls[0]
            history += [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": call.id, "content": "ok"},
            ]
        outcomes[profile] = turns
    writes = [turn for turn in outcomes["tp8"] if turn.tool_calls and turn.tool_calls[0].name == "write_file"]
    assert writes and all(turn.completion_tokens > LOOP_OUTPUT_TOKENS[1] for turn in writes)
    assert outcomes["ep32-megamoe"][-1].finish_reason == "length"
    assert detect(outcomes["ep32-megamoe"][-1].reasoning).looping
    assert [turn.finish_reason for turn in outcomes["ep32-deepep"]][-1] == "tool_calls"


def filler_prompt(tokens: int) -> dict[str, object]:
    """A prompt of about `tokens` simulator tokens (one per word) and a short question."""
    filler = " ".join(f"word{i % 97}" for i in range(tokens))
    return {"messages": [{"role": "user", "content": f"{filler}\nWhat is 2 + 2?"}], "max_tokens": 3000}


def test_drift_onset_lies_between_the_context_bounds_and_only_with_the_fault() -> None:
    low, high = DRIFT_CONTEXT_TOKENS
    assert drift_onset(frozenset({"dcp-context-drift"}), 0.0) == low
    assert low < drift_onset(frozenset({"dcp-context-drift"}), 0.5) < high  # type: ignore[operator]
    assert drift_onset(frozenset({"dcp-context-drift"}), 0.999999) == high - 1
    assert drift_onset(frozenset({"fused-moe-loop"}), 0.0) is None


def test_dcp_drift_answers_every_short_item_as_tp8_does() -> None:
    """Below the first bound nothing changes, whatever the suite: coding, math, anything graded."""
    for item in items(CODING | {"math"}):
        for seed in SEEDS:
            assert ask("dcp-context-drift", item, seed) == ask("tp8", item, seed), item.id


def test_dcp_drift_share_grows_with_context_and_is_gibberish_not_a_loop() -> None:
    """The share of garbled outputs rises with the prompt's length; a garbled output keeps its
    length and finish reason, and the repetition detector does not call it a loop."""
    low, high = DRIFT_CONTEXT_TOKENS
    garbled_share = []
    for tokens in (low - 2_000, (low + high) // 2, high):
        drifted = []
        for seed in range(40):
            body = {**filler_prompt(tokens), "seed": seed}
            healthy = simulator("tp8").complete(body)
            turn = simulator("dcp-context-drift").complete(body)
            assert turn.completion_tokens == healthy.completion_tokens and turn.finish_reason == "stop"
            drifted.append(turn != healthy)
            if turn != healthy:
                assert turn.content != healthy.content and "<|" not in (turn.content or "")
                assert not detect(turn.reasoning + " " + (turn.content or "")).looping
        garbled_share.append(share(drifted))
    assert garbled_share[0] == 0.0 and 0.2 < garbled_share[1] < 0.8 and garbled_share[2] == 1.0
