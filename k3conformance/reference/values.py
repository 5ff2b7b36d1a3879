"""The reference deployment's value types: what flows between request parsing, the simulator,
the fault hooks, the wire layer and the profiles.

They live here, apart from the code that makes them, so that `faults.py`, `request.py`,
`simulator.py` and `profiles.py` import this module and never each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal

from k3conformance.reference.catalogue import KNOWN_FAULTS

# --- a request --------------------------------------------------------------------------


class InvalidRequest(Exception):
    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code


# What request validation can find wrong with a request; faults.rejection_status says how a deployment answers each.
Problem = Literal[
    "duplicate-tool-name",
    "invalid-tool-name",
    "tool-message-without-id",
    "invalid-tool-choice",
    "tool-choice-without-tools",
    "undeclared-named-tool",
    "reasoning-in-history",
    "malformed-tool",
    "malformed-dynamic-tool",
    "dynamic-tools-misplaced",
    "foreign-tool-call-id",
    "list-content-in-history",
    "unlocked-sampling-parameter",
    "malformed-response-format",
    "tool-choice-without-tools-field",
]


@dataclass(frozen=True)
class Sampling:
    """The sampling parameters a request is generated with, after the server's defaults."""

    temperature: float
    top_p: float
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0


# K3's recipe (the model card; Moonshot's API fixes it, KVV tests/params): temperature 1.0
# thinking, 0.6 not thinking; top_p 0.95; no penalties.
K3_THINKING_SAMPLING = Sampling(temperature=1.0, top_p=0.95)
K3_INSTANT_SAMPLING = Sampling(temperature=0.6, top_p=0.95)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    parameters: Mapping[str, Any]
    # `function.strict`: the arguments are generated under the tool's schema grammar.
    strict: bool = False


@dataclass(frozen=True)
class ChatRequest:
    messages: tuple[Mapping[str, Any], ...]
    tools: tuple[ToolSpec, ...]
    tool_choice: str  # one of request.TOOL_CHOICE_MODES, or "named"
    named_tool: str | None
    effort: str
    thinking: bool
    # Whether the reasoning of earlier assistant turns stays in the prompt (thinking.keep
    # "all", chat_template_kwargs.preserve_thinking).
    keep_reasoning: bool
    max_tokens: int | None
    response_format: Mapping[str, Any] | None
    seed: int | None
    sampling: Sampling = K3_THINKING_SAMPLING
    # `stop`: strings that end the output where they would first appear, left out of it.
    stop: tuple[str, ...] = ()


# --- what the model answers -------------------------------------------------------------


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, exactly as sent on the wire


@dataclass(frozen=True)
class SimulatedTurn:
    reasoning: str  # empty when thinking is disabled
    content: str | None  # None when the turn is tool calls
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int
    # Whether the request turned thinking on, as the chat template saw it; vLLM builds its
    # reasoning parser per request from the same switch (xtml/parsers/vllm.py).
    thinking: bool = True
    # Whether the request's last message is a tool result (Dynamo issue 10533 switched the
    # reasoning parser off for such turns).
    after_tool_result: bool = False


# --- the fixture answers the simulator knows --------------------------------------------


@dataclass(frozen=True)
class ExpectedToolCall:
    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True)
class FixtureItem:
    suite: str
    id: str
    prompt: str
    answer: Any
    reply: str
    wrong_reply: str | None
    graded: bool
    tool_calls: tuple[ExpectedToolCall, ...]


# --- a profile ----------------------------------------------------------------------------

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
    # Deliberate deployment bugs (catalogue.py); see faults.py for where each one takes effect.
    faults: frozenset[str] = field(default_factory=frozenset)
    # The profile whose samples this one draws (a fault profile's healthy original), so
    # that the two answer alike wherever the fault does not apply; None: its own.
    base: str | None = None
    kind: ProfileKind = "conformance"
    # Accuracy of the items of single fixture suites, where it differs from `accuracy`.
    suite_accuracy: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    # The registry shape (k3conformance.deployment.shapes) whose server arguments /get_server_info reports.
    shape: str = "tp8"
    # The parser that reads the model's raw output (reference/parsers): `builtin` or a real one.
    parser: str = "builtin"
    # How the items' solve chances spread around the accuracy (reference/difficulty.py): the
    # measured spread of a real model, or every item at the mean (exchangeable, the worst case).
    item_spread: str = "measured"

    def __post_init__(self) -> None:
        if not all(0.0 <= value <= 1.0 for value in (self.accuracy, *self.suite_accuracy.values())):
            raise ValueError(f"profile {self.name!r}: accuracy must be in [0, 1]")
        unknown = self.faults - KNOWN_FAULTS
        if unknown:
            raise ValueError(f"profile {self.name!r}: unknown faults {sorted(unknown)}")

    def accuracy_for(self, suite: str) -> float:
        return self.suite_accuracy.get(suite, self.accuracy)
