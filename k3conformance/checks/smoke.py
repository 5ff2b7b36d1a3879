"""Checks of the smoke suite (`suites/test_smoke.py`): the whole path from request to
answer works, streamed and not."""

from __future__ import annotations

from typing import Any

from k3conformance.checks.failures import check_stopped, expect
from k3conformance.endpoint.completion import Completion


def check_answer(completion: Completion, answer: str, mode: str) -> None:
    __tracebackhide__ = True
    check_stopped(completion, mode)
    content = completion.content or ""
    expect(bool(content.strip()), layer="parser", expected=f"a non-empty answer in content ({mode})", got=completion)
    expect(
        answer.lower() in content.lower(),
        layer="model",
        expected=f"the answer {answer!r} in content ({mode})",
        got=content,
    )


def check_chat_round_trip(completion: Completion, answer: str, model: str) -> None:
    __tracebackhide__ = True
    check_answer(completion, answer, "non-streaming")
    expect(
        completion.model == model,
        layer="api",
        expected=f"the response to name the requested model {model!r}",
        got=completion.model,
    )


def check_streaming_matches_non_streaming(plain: Completion, streamed: Completion, answer: str) -> None:
    __tracebackhide__ = True
    check_answer(streamed, answer, "streaming")
    assert streamed.stream is not None
    expect(
        streamed.stream.finish_frames == 1,
        layer="api",
        expected="exactly one stream frame with a finish_reason",
        got=f"{streamed.stream.finish_frames} finish frames in {streamed.stream.frames}",
    )
    expect(
        plain.finish_reason == streamed.finish_reason,
        layer="api",
        expected="the same finish_reason streamed and not",
        got=f"non-streaming {plain.finish_reason!r}, streaming {streamed.finish_reason!r}",
    )
    expect(
        plain.reasoning_field == streamed.reasoning_field,
        layer="parser",
        expected="reasoning in the same field streamed and not",
        got=f"non-streaming {plain.reasoning_field!r}, streaming {streamed.reasoning_field!r}",
    )


def check_usage_reported(usage: dict[str, Any] | None, mode: str) -> None:
    __tracebackhide__ = True
    expect(usage is not None, layer="api", expected=f"a usage object ({mode})", got=usage)
    assert usage is not None
    prompt, completion, total = (usage.get(key) for key in ("prompt_tokens", "completion_tokens", "total_tokens"))
    expect(
        isinstance(prompt, int) and isinstance(completion, int) and prompt > 0 and completion > 0,
        layer="api",
        expected=f"positive prompt_tokens and completion_tokens ({mode})",
        got=usage,
    )
    assert isinstance(prompt, int) and isinstance(completion, int)  # for the type checker: expect() raised otherwise
    expect(
        total == prompt + completion,
        layer="api",
        expected=f"total_tokens = prompt + completion ({mode})",
        got=usage,
    )
