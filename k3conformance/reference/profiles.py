"""Named behaviours of the reference deployment: how well and how verbosely the simulator answers.

`tp8` is healthy. Every other profile is `tp8` plus exactly one deliberate fault that
reproduces a real serving bug, named after the fault, so that each conformance check
can be shown to fail on a deployment with that bug and to pass on a healthy one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from k3conformance.reference.faults import KNOWN_FAULTS

# healthy: tp8 itself. conformance: tp8 plus one API or parser fault, which the
# conformance suites must catch. accuracy: a layout that answers worse or loops, which
# only the gate's comparison with a baseline can catch. transport: tp8 behind a network
# or server that fails requests, which retries and resume must absorb.
ProfileKind = Literal["healthy", "conformance", "accuracy", "transport"]


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    # Probability that a graded fixture item is answered correctly.
    accuracy: float
    # Mean reasoning length in words for each reasoning effort.
    reasoning_words: Mapping[str, int]
    latency_s: float = 0.0
    # Deliberate deployment bugs; see faults.py for where each one takes effect.
    faults: frozenset[str] = field(default_factory=frozenset)
    # The profile whose samples this one draws (a fault profile's healthy original), so
    # that the two answer alike wherever the fault does not apply; None: its own.
    base: str | None = None
    kind: ProfileKind = "conformance"
    # Accuracy of the items of single fixture suites, where it differs from `accuracy`.
    suite_accuracy: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    # The registry shape (k3conformance.endpoint.shapes) whose server arguments /get_server_info reports.
    shape: str = "tp8"

    def __post_init__(self) -> None:
        if not all(0.0 <= value <= 1.0 for value in (self.accuracy, *self.suite_accuracy.values())):
            raise ValueError(f"profile {self.name!r}: accuracy must be in [0, 1]")
        unknown = self.faults - KNOWN_FAULTS
        if unknown:
            raise ValueError(f"profile {self.name!r}: unknown faults {sorted(unknown)}")

    def accuracy_for(self, suite: str) -> float:
        return self.suite_accuracy.get(suite, self.accuracy)


_TP8 = Profile(
    name="tp8",
    description="healthy TP8 on one 8-GPU node",
    accuracy=0.9,
    reasoning_words=MappingProxyType({"low": 60, "high": 250, "max": 600}),
    kind="healthy",
    # Coding at K3's published TP8 score on a 113-task coding benchmark (sglang issue 40751).
    suite_accuracy=MappingProxyType({"coding": 0.68, "humaneval-answer-key": 0.68}),
)

# Each fault and the real bug it reproduces.
_FAULT_BUGS: Mapping[str, str] = {
    # reasoning and the API
    "no-reasoning-parser": (
        "server started without --reasoning-parser kimi_k3: no reasoning field, the thinking block "
        "arrives inside content between <|open|>think<|sep|> and <|close|>think<|sep|>"
    ),
    "reasoning-field-vllm": (
        "newer vLLM field name: reasoning travels in `reasoning` instead of `reasoning_content` "
        "(not a bug by itself; strict mode flags it)"
    ),
    "message-close-leak": (
        "vLLM issues 51399/51412: the <|close|>message<|sep|> end marker leaks as a last content delta in streams"
    ),
    "k2-think-tags": "Kimi K2 chat template markers leaking into K3 output: reasoning wrapped in <think>...</think>",
    "raw-stop-token": "ROCm/ATOM issue 1727: finish_reason is the raw stop token `stop_163586` instead of `stop`",
    "empty-content": "the reasoning parser swallows the answer: content is empty and the answer ends the reasoning",
    "length-reported-as-stop": "truncation by max_tokens reported as finish_reason `stop` instead of `length`",
    "effort-ignored": "thinking effort not passed to the chat template: every request reasons at `max` length",
    "null-reasoning-stream": (
        'SGLang issue 39898: every streamed delta carries "reasoning_content": null and the reasoning '
        "text is never streamed"
    ),
    "double-finish": "streams send a second finish frame (finish_reason `stop`, empty delta) after the real one",
    "no-stream-usage": "stream_options.include_usage ignored: streams end without a usage frame",
    "content-before-reasoning": "streams send every content delta before the reasoning deltas",
    "usage-excludes-reasoning": (
        "usage.completion_tokens leaves out reasoning tokens (completion_tokens_details.reasoning_tokens still set)"
    ),
    "rejects-reasoning-history": (
        "servers that reject preserved thinking: HTTP 400 when an assistant message in the history "
        "carries `reasoning_content` or `reasoning`"
    ),
    # tool calls
    "empty-tool-calls": (
        "MoonshotAI Kimi-K2 issue 26: the tool-call parser misses the calls: `tool_calls: []`, "
        "finish_reason `tool_calls`, and the raw XTML call markup in content"
    ),
    "stringified-arguments": (
        "K3 XTML tool parser treating every argument as a string: numbers, booleans, arrays and "
        'objects arrive JSON-encoded as strings ({"days": "3"})'
    ),
    "hallucinated-tool-name": (
        "vLLM PR 36891: the tool name keeps the `functions.` prefix (functions.get_weather), naming an undeclared tool"
    ),
    "reused-tool-ids": "tool-call ids restart at functions.NAME:0 every turn, so ids repeat within a conversation",
    "duplicate-tool-ids": (
        "tool-call id disputes (functions.NAME:IDX vs NAME_IDX vs call_<uuid>) gone wrong: parallel calls "
        "in one message share one id"
    ),
    "tool-choice-none-ignored": 'vLLM PR 43155: tool_choice "none" treated as "auto"',
    "tool-choice-required-ignored": 'SGLang issue 39895: tool_choice "required" treated as "auto"',
    "tool-choice-named-ignored": (
        'a named tool_choice treated as "auto", and a named tool missing from `tools` is not rejected'
    ),
    "required-without-tools-accepted": (
        "tool_choice required or named without `tools` answered 200 with text instead of rejected with 400"
    ),
    "parallel-index-collision": "every streamed tool-call delta has index 0, so clients merge parallel calls into one",
    "eager-tool-calls": 'with tools declared and tool_choice "auto" a tool is always called, even for chit-chat',
    "stream-repeats-tool-name": (
        "streamed tool calls repeat id, type and function.name in every argument delta, so clients concatenate names"
    ),
    "xtml-tools-without-tools": (
        "SGLang issue 39583: with no tools declared the tool-call parser never runs, so tool calls "
        "leak into content as raw XTML markup"
    ),
    "response-format-ignored": "response_format ignored: plain text where JSON was requested",
    "lenient-validation": (
        "invalid requests (duplicate or invalid tool names, tool message without tool_call_id, "
        "invalid tool_choice) answered 200 instead of rejected with 400"
    ),
    "validation-500": (
        "invalid requests (duplicate or invalid tool names, tool message without tool_call_id, "
        "invalid tool_choice) crash with HTTP 500 instead of a 400"
    ),
    # the request contract (issue 13)
    "effort-precedence-inverted": (
        "reasoning_effort overrides thinking.effort / chat_template_kwargs.thinking_effort, the opposite of "
        "SGLang 0.5.23 (serving_chat.py) and Moonshot's API (KVV test_reasoning_effort_ignored_when_effort_present)"
    ),
    "reasoning-effort-dropped": (
        "top-level reasoning_effort never reaches the chat template (only chat_template_kwargs is forwarded), "
        "so requests that set only reasoning_effort reason at max"
    ),
    "thinking-disable-ignored": (
        'thinking type "disabled" (or chat_template_kwargs.thinking false) ignored: the template always thinks'
    ),
    "history-reasoning-dropped": (
        'thinking.keep "all" / preserve_thinking ignored: earlier turns are rendered without their reasoning, '
        "as K2's template did, so it neither reaches the model nor counts in prompt_tokens"
    ),
    "dynamic-tools-ignored": (
        "tools declared inside system messages (messages[].tools, a K3 API feature) dropped as an unknown "
        "field: those tools are never called, tool_choice required with only them is refused"
    ),
    "dynamic-tools-unvalidated": (
        "malformed tools inside messages (bogus type, missing name, invalid names, tools on a user turn) "
        "answered 200 instead of rejected with 400"
    ),
    "response-format-unvalidated": (
        "malformed response_format (no name, no schema, non-boolean strict, unknown type) answered 200 as text "
        "instead of rejected with 400"
    ),
    "rejects-tool-choice-without-tools": 'tool_choice "auto" or "none" without a tools field rejected with 400',
    "sampling-params-unlocked": (
        "sampling parameters that Moonshot's API fixes (temperature above 1, top_p, penalties) passed on "
        "unchanged, as open-source SGLang/vLLM do: a fault only for a vendor build (--k3-vendor)"
    ),
    "strict-history-ids": (
        "histories written by other clients refused: tool-call ids other than functions.NAME:IDX and list "
        "content in assistant turns get HTTP 400 (K2 on vLLM: the id parser was too strict)"
    ),
    "numeric-strings-coerced": (
        "a naive argument parser guesses each value's type from its text instead of the declared type: "
        '"00125648" arrives as the number 125648'
    ),
    "schema-constraints-dropped": (
        "the tool-call grammar drops JSON-schema constraints (ranges, lengths, patterns, formats, const, "
        "minItems): arguments have the right types but break the declared bounds"
    ),
    "prompt-tokens-exclude-tools": (
        "usage.prompt_tokens leaves out the rendered tool declarations, so it disagrees with the server's "
        "own /tokenize for requests with tools"
    ),
    # state
    "prefix-cache-corruption": (
        "SGLang prefix caching of K3's recurrent state (69 of 93 layers keep a fixed-size state "
        "snapshotted at prompt positions): answers corrupted when a cached prompt prefix is reused"
    ),
}


# Each transport fault and what the client sees. Every other distinct request is hit, on
# its first attempt(s) only (see transport.py), so retries and resume recover the run.
_TRANSPORT_BUGS: Mapping[str, str] = {
    "latency-spikes": "every other request stalls 3 s on its first attempt (mid-stream, after the first frame)",
    "dropped-connection": "every other request loses its connection half-way through the answer on its first attempt",
    "stream-without-done": (
        "every other stream ends cleanly right after the finish frame on its first attempt: no usage frame, no [DONE]"
    ),
    "malformed-frame": "every other request gets a frame (or body) of cut-off JSON on its first attempt",
    "rate-limited": (
        "every other request gets HTTP 429 with Retry-After: 1 on its first attempt, and again if retried too early"
    ),
    "server-errors": "every other request gets a burst of server errors: HTTP 503, then HTTP 500 on its retry",
    "server-restart": (
        "the server restarts at the fourth request: every open connection is cut and the next two attempts are refused"
    ),
}


def _tp8_with(fault: str, description: str, kind: ProfileKind) -> Profile:
    return dataclasses.replace(
        _TP8, name=fault, description=description, faults=frozenset({fault}), base=_TP8.name, kind=kind
    )


# The layouts of the published K3 regression (sglang issue 40751), as accuracy profiles:
# TP8 68.1% on 113 coding tasks, EP32 with DeepEP about 65.5%, EP32 with the fused
# MegaMoE kernel 42.5% with half of its outputs looping, and a math check that looked fine.
_EP32_DEEPEP = dataclasses.replace(
    _TP8,
    name="ep32-deepep",
    description="EP32 with DeepEP (sglang issue 40751): a couple of points below tp8, no loops",
    accuracy=0.88,
    suite_accuracy=MappingProxyType({"coding": 0.655, "humaneval-answer-key": 0.655}),
    base=_TP8.name,
    kind="accuracy",
    shape="ep32-deepep",
)
_EP32_MEGAMOE = dataclasses.replace(
    _TP8,
    name="ep32-megamoe",
    description=(
        "EP32 with the fused MegaMoE kernel (sglang issue 40751): about half of the long coding outputs loop "
        "until the token limit after a healthy start, coding about 26 points below tp8, math unchanged"
    ),
    faults=frozenset({"fused-moe-loop"}),
    base=_TP8.name,
    kind="accuracy",
    shape="ep32-megamoe",
)

PROFILES: dict[str, Profile] = {
    _TP8.name: _TP8,
    **{fault: _tp8_with(fault, f"tp8 plus one fault: {bug}", "conformance") for fault, bug in _FAULT_BUGS.items()},
    **{
        fault: _tp8_with(fault, f"tp8 behind a failing transport: {bug}", "transport")
        for fault, bug in _TRANSPORT_BUGS.items()
    },
    _EP32_DEEPEP.name: _EP32_DEEPEP,
    _EP32_MEGAMOE.name: _EP32_MEGAMOE,
}


def profiles_of_kind(kind: ProfileKind) -> list[str]:
    return sorted(name for name, profile in PROFILES.items() if profile.kind == kind)


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise KeyError(f"unknown reference profile {name!r}; known profiles: {known}") from None
