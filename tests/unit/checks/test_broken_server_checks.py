"""Checks that used to pass a broken server (issue 11), each on the case that fooled it.

Each case is also shown end to end on a reference profile with the fault in
tests/e2e/test_conformance_faults.py; these pin the rule on the exact reproduction."""

from __future__ import annotations

from typing import Any

import pytest

from k3conformance.checks import reasoning, smoke, structured_output, tool_calls
from k3conformance.checks.failures import ConformanceFailure
from k3conformance.endpoint.completion import Completion, StreamStats

WORDS_600 = " ".join(["the loop bound covers every index before returning"] * 75)  # 600 words


def completion(content: str | None, reasoning_text: str | None = "thinking", **fields: Any) -> Completion:
    values: dict[str, Any] = {
        "tool_calls": None,
        "finish_reason": "stop",
        "usage": None,
        "model": "k3",
        "latency_s": 0.1,
    }
    values.update(fields)
    return Completion(content, reasoning_text, "reasoning_content", **values)


def layer_of(call: Any, *args: Any) -> str | None:
    try:
        call(*args)
    except ConformanceFailure as failure:
        return failure.layer
    return None


# --- usage_counts_reasoning -----------------------------------------------------------------


def usage(prompt: int, generated: int, **extra: Any) -> dict[str, Any]:
    return {"prompt_tokens": prompt, "completion_tokens": generated, "total_tokens": prompt + generated, **extra}


def test_600_words_of_reasoning_counted_as_2_tokens_fail() -> None:
    undercounted = completion("42", WORDS_600, usage=usage(20, 2))
    assert layer_of(reasoning.check_usage_counts_reasoning, undercounted, "plain") == "api"


def test_reasoning_tokens_reported_as_zero_fail() -> None:
    zero = completion("42", WORDS_600, usage=usage(20, 700, completion_tokens_details={"reasoning_tokens": 0}))
    assert layer_of(reasoning.check_usage_counts_reasoning, zero, "plain") == "api"


def test_plausible_usage_passes() -> None:
    # About 4.3 characters per token, as BPE gives English.
    counted = completion("42", WORDS_600, usage=usage(20, 700, completion_tokens_details={"reasoning_tokens": 699}))
    assert layer_of(reasoning.check_usage_counts_reasoning, counted, "plain") is None
    assert (
        layer_of(reasoning.check_usage_counts_reasoning, completion("42", WORDS_600, usage=usage(20, 650)), "plain")
        is None
    )


# --- multi_turn_with_reasoning_history --------------------------------------------------------


def test_an_answer_without_the_earlier_reasoning_fails() -> None:
    first = completion("ready", "I will keep it private. I pick the number 482913.")
    assert layer_of(reasoning.check_multi_turn_with_reasoning_history, first, completion("731002"), "plain") == "api"
    assert layer_of(reasoning.check_multi_turn_with_reasoning_history, first, completion("482913"), "plain") is None


def test_a_first_turn_that_picks_nothing_in_its_reasoning_is_the_models() -> None:
    first = completion("482913", "I pick the number 482913.")  # shown in the answer: nothing private
    assert layer_of(reasoning.check_multi_turn_with_reasoning_history, first, completion("482913"), "plain") == "model"


# --- bad arguments and leaked thinking: the parser's ------------------------------------------


def test_arguments_that_are_not_json_blame_the_parser() -> None:
    call = {
        "id": "functions.get_weather:0",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"'},
    }
    cut = completion(None, tool_calls=[call], finish_reason="tool_calls")
    expected = [{"name": "get_weather", "arguments": {"city": "Paris"}}]
    with pytest.raises(ConformanceFailure, match="arguments that are not JSON") as failure:
        tool_calls.check_calls_match_expected(cut, expected, "plain")
    assert failure.value.layer == "parser"


def test_a_leaked_think_block_breaking_response_format_blames_the_parser() -> None:
    leaked = completion('<|open|>think<|sep|>Let me think.<|close|>think<|sep|>{"a": 1}', None)
    assert (
        layer_of(structured_output.check_response_format_json_schema, leaked, {"type": "object"}, "plain") == "parser"
    )
    assert (
        layer_of(
            structured_output.check_response_format_json_schema, completion("not json"), {"type": "object"}, "plain"
        )
        == "api"
    )


# --- the smoke answer ---------------------------------------------------------------------------


@pytest.mark.parametrize(("content", "answer"), [("42 7", "42"), ("pong 7", "pong"), ("Parisian", "Paris")])
def test_an_answer_followed_by_more_is_not_the_answer(content: str, answer: str) -> None:
    assert layer_of(smoke.check_answer, completion(content), answer, "plain") is not None


def test_trailing_tokens_blame_the_api_and_other_replies_the_model() -> None:
    assert layer_of(smoke.check_answer, completion("42 7"), "42", "plain") == "api"
    assert layer_of(smoke.check_answer, completion("41"), "42", "plain") == "model"


@pytest.mark.parametrize("content", ["42", " 42\n", "**42**", "42.", "`42`", '"42"'])
def test_the_answer_with_its_wrapping_passes(content: str) -> None:
    assert layer_of(smoke.check_answer, completion(content), "42", "plain") is None


# --- a stream without [DONE] ----------------------------------------------------------------------


def test_a_stream_without_done_fails_saying_what_arrived() -> None:
    stats = StreamStats(frames=12, finish_frames=1, usage_frames=1, done_marker=False)
    with pytest.raises(
        ConformanceFailure, match=r"12 frame.*1 finish frame.*1 usage frame.*without data: \[DONE\]"
    ) as failure:
        smoke.check_stream_ends_with_done(completion("42", stream=stats))
    assert failure.value.layer == "api"
    assert layer_of(smoke.check_stream_ends_with_done, completion("42", stream=StreamStats(done_marker=True))) is None
