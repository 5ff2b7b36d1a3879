"""Smoke: the whole path from request to run record works against the endpoint.

That the model is listed by `/v1/models` is checked before any item runs: the plugin
stops with one message when it is not.

Not a quality measurement: each prompt has one obvious answer that any working K3
deployment gives. A failure here means the serving path itself is broken, and the
other suites' numbers would mean nothing until it is fixed.
"""

from __future__ import annotations

from typing import Any

import pytest

from k3conformance import Completion, Probe, ProbeResult
from k3conformance.checks.failures import check_stopped, expect
from k3conformance.datasets.bundled import load_fixture
from k3conformance.endpoint.resolved import ResolvedEndpoint

SUITE = "smoke"
# K3 thinks before every answer, at effort max for a while: leave it room.
MAX_TOKENS = 8192
FINISH_REASONS = ("stop", "length", "tool_calls", "content_filter")

SMOKE = load_fixture(SUITE)
ANSWERS = {item["id"]: str(item["answer"]) for item in SMOKE.items}


def _probe(item: dict[str, Any]) -> Probe:
    messages = [{"role": "user", "content": item["prompt"]}]
    return Probe(
        SUITE,
        item["id"],
        requests={"plain": {"messages": messages}, "stream": {"messages": messages, "stream": True}},
        samples=1,
        max_tokens=MAX_TOKENS,
        data=SMOKE.provenance(),
    )


PROBES = [_probe(item) for item in SMOKE.items]
probes = pytest.mark.parametrize("probe", PROBES, ids=str)


def _check_answer(completion: Completion, answer: str, mode: str) -> None:
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


@probes
def test_chat_round_trip(probe: Probe, k3_result: ProbeResult, k3_endpoint: ResolvedEndpoint) -> None:
    completion = k3_result.completion("plain")
    _check_answer(completion, ANSWERS[probe.item], "non-streaming")
    expect(
        completion.model == k3_endpoint.model,
        layer="api",
        expected=f"the response to name the requested model {k3_endpoint.model!r}",
        got=completion.model,
    )


@probes
def test_streaming_matches_non_streaming(probe: Probe, k3_result: ProbeResult) -> None:
    plain, streamed = k3_result.completion("plain"), k3_result.completion("stream")
    _check_answer(streamed, ANSWERS[probe.item], "streaming")
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


@probes
def test_usage_reported(probe: Probe, k3_result: ProbeResult) -> None:
    for step in ("plain", "stream"):
        usage = k3_result.completion(step).usage
        mode = "streaming, with stream_options.include_usage" if step == "stream" else "non-streaming"
        expect(usage is not None, layer="api", expected=f"a usage object ({mode})", got=usage)
        assert usage is not None
        prompt, completion, total = (usage.get(key) for key in ("prompt_tokens", "completion_tokens", "total_tokens"))
        expect(
            isinstance(prompt, int) and isinstance(completion, int) and prompt > 0 and completion > 0,
            layer="api",
            expected=f"positive prompt_tokens and completion_tokens ({mode})",
            got=usage,
        )
        expect(
            total == prompt + completion,
            layer="api",
            expected=f"total_tokens = prompt + completion ({mode})",
            got=usage,
        )
