"""Reasoning parser: thinking in the reasoning field, the answer in content, nothing else.

Every check runs on a non-streaming and a streaming request (`mode`); streams are
reassembled into the same shape, and what only a stream can get wrong is checked on
its frames. Logic: `k3conformance/checks/reasoning.py`.
"""

from __future__ import annotations

from typing import Any

import pytest

from k3conformance import Completion, Exchange, Probe, ProbeResult, Settings, load_fixture
from k3conformance.checks import reasoning as checks

SUITE = "reasoning"
MODES = ("plain", "stream")
MAX_TOKENS = 8192
TRUNCATED_BUDGET = 16
# Samples per effort for the effort check: a one-sided exact permutation test over 6 + 6
# lengths can reach p = 0.001.
EFFORT_SAMPLES = 6
EFFORTS = ("low", "high", "max")

FIXTURE = load_fixture(SUITE)
MULTI_TURN: dict[str, str] = FIXTURE.extra["multi_turn"]


def ask(prompt: str, mode: str, **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": prompt}], "stream": mode == "stream", **extra}


ITEMS = [
    Probe(
        SUITE,
        item["id"],
        requests={
            **{mode: ask(item["prompt"], mode) for mode in MODES},
            **{f"truncated-{mode}": ask(item["prompt"], mode, max_tokens=TRUNCATED_BUDGET) for mode in MODES},
        },
        samples=1,
        max_tokens=MAX_TOKENS,
        data=FIXTURE.provenance(),
    )
    for item in FIXTURE.items
]
EFFORT = Probe(
    SUITE,
    "effort",
    requests={
        f"{effort}-{mode}": ask(FIXTURE.items[0]["prompt"], mode, reasoning_effort=effort)
        for effort in EFFORTS
        for mode in MODES
    },
    samples=EFFORT_SAMPLES,
    max_tokens=MAX_TOKENS,
    data=FIXTURE.provenance(),
)


async def _multi_turn(exchange: Exchange) -> None:
    first_question = {"role": "user", "content": MULTI_TURN["first"]}
    first = await exchange.send("first", {"messages": [first_question]})
    if not isinstance(first, Completion):
        return
    # K3's chat template keeps earlier thinking when preserve_thinking is on: the
    # server must accept the assistant turn with its reasoning.
    history = [first_question, first.as_history_message()]
    follow_up = [*history, {"role": "user", "content": MULTI_TURN["follow_up"]}]
    for mode in MODES:
        await exchange.send(mode, {"messages": follow_up, "stream": mode == "stream"})


MULTI_TURN_PROBE = Probe(SUITE, "multi-turn", conversation=_multi_turn, samples=1, max_tokens=MAX_TOKENS)

items = pytest.mark.parametrize("probe", ITEMS, ids=str)
modes = pytest.mark.parametrize("mode", MODES)


@items
@modes
def test_reasoning_present(probe: Probe, mode: str, k3_result: ProbeResult, k3_settings: Settings) -> None:
    checks.check_reasoning_present(k3_result.completion(mode), mode, strict_field=k3_settings.strict_reasoning_field)


@items
@modes
def test_no_markup_leaks(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    checks.check_no_markup_leaks(k3_result.completion(mode), mode)


@items
@modes
def test_answer_follows_reasoning(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    checks.check_answer_follows_reasoning(k3_result.completion(mode), mode)


@items
@modes
def test_truncation_reported_as_length(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    checks.check_truncation_reported_as_length(k3_result.completion(f"truncated-{mode}"), mode, TRUNCATED_BUDGET)


@items
@modes
def test_usage_counts_reasoning(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    checks.check_usage_counts_reasoning(k3_result.completion(mode), mode)


@items
def test_stream_reasoning_before_content(probe: Probe, k3_result: ProbeResult) -> None:
    checks.check_stream_reasoning_before_content(k3_result.completion("stream"))


@items
def test_stream_one_finish_frame(probe: Probe, k3_result: ProbeResult) -> None:
    checks.check_stream_one_finish_frame(k3_result.completion("stream"))


@items
def test_stream_usage_frame(probe: Probe, k3_result: ProbeResult) -> None:
    checks.check_stream_usage_frame(k3_result.completion("stream"))


@items
def test_stream_reasoning_not_nulled(probe: Probe, k3_result: ProbeResult) -> None:
    checks.check_stream_reasoning_not_nulled(k3_result.completion("stream"))


@pytest.mark.parametrize("probe", [EFFORT], ids=str)
@modes
def test_effort_orders_reasoning_length(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    lengths = {
        effort: [len((completion.reasoning or "").split()) for completion in k3_result.completions(f"{effort}-{mode}")]
        for effort in EFFORTS
    }
    checks.check_effort_orders_reasoning_length(lengths, mode)


@pytest.mark.parametrize("probe", [MULTI_TURN_PROBE], ids=str)
@modes
def test_multi_turn_with_reasoning_history(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    checks.check_multi_turn_with_reasoning_history(
        k3_result.completion("first"),
        k3_result.completion(mode),
        f"{mode}, second turn with the first turn's reasoning",
    )
