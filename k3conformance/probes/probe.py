"""What a suite item asks of the endpoint (`Probe`) and what came back (`ProbeResult`).

A suite parametrizes its tests with probes; the plugin sends every probe's requests
ahead of the tests, concurrently, and a test receives its probe's result through the
`k3_result` fixture. Several tests may share one probe: its requests go out once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import pytest

from k3conformance.endpoint.completion import Completion
from k3conformance.endpoint.errors import ErrorClass, RequestError
from k3conformance.options import Settings

INTERNAL_SERVER_ERROR = 500

Outcome = Completion | RequestError


class Exchange(Protocol):
    """A conversation's view of the endpoint for one sample of its probe (the runner implements it)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def run_id(self) -> str:
        """Stable within a run and its resumptions: a nonce for prompts that must miss server caches."""
        ...

    def note(self, name: str, value: Any) -> None:
        """Keep something the conversation computed for the test to read (`SampleResult.notes`)."""

    async def send(self, step: str, partial: Mapping[str, Any]) -> Outcome:
        """Build, send and record one request; each step name once per sample."""
        ...

    async def count_prompt_tokens(self, partial: Mapping[str, Any]) -> int | RequestError:
        """The server's own tokenizer count for the request `partial` builds (its tokenization endpoint)."""
        ...


Conversation = Callable[[Exchange], Awaitable[None]]


@dataclass(frozen=True, eq=False)
class Probe:
    """One item of a suite.

    `requests` maps a step name to a partial chat request (at least `messages`; the
    plugin adds model, sampling, budget, seed and thinking parameters, and anything
    given here wins). `conversation` instead drives several dependent requests, e.g. a
    tool round trip; it calls `exchange.send(step, partial)` for each.
    """

    suite: str
    item: str
    requests: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    conversation: Conversation | None = None
    # None: as many samples as --k3-samples; conformance probes pin this to 1.
    samples: int | None = None
    # The suite's generation budget; --k3-max-tokens overrides it.
    max_tokens: int | None = None
    # Validation probes expect the server to refuse: an HTTP 500 is then the answer under
    # test (a crash where a 400 belongs), not an infrastructure failure. 429, 502, 503
    # and 504 still are: they say nothing about validation.
    status_errors_are_results: bool = False
    # Checks of the thinking parameters themselves send exactly the ones their requests
    # give; every other probe gets the run's (--k3-think-mode, --k3-reasoning-effort).
    thinking_as_given: bool = False
    # Checks of the sampling defaults send exactly the sampling parameters their requests
    # give; every other probe gets the run's --k3-temperature and --k3-top-p.
    sampling_as_given: bool = False
    # What sort of item this is within its suite (a tool-call category, a schema family):
    # a limited run keeps at least one of every kind each check uses. "" for the dataset's.
    kind: str = ""
    data: Mapping[str, Any] = field(default_factory=dict)
    # A round of a suite sampled in rounds (the sequential gate) sends samples first_sample … first_sample +
    # samples − 1 of the item; records keep those absolute indices, so --k3-resume finds them.
    first_sample: int = 0
    # The load lane: its conversation runs holding every request slot of the process, so that
    # nothing else this process sends is in flight beside it, and its own requests do not wait
    # for slots, so that it sets the load itself (--k3-load-concurrency, beyond --k3-concurrency).
    # It is not sent ahead of its test (runner.py), and its tests run last (run/ordering.py).
    exclusive: bool = False
    # The load lane again: its tests judge the endpoint's failures themselves (a deployment that
    # crashes only under load is its finding, checks/load.py), so the `k3_result` fixture hands
    # them the result instead of leaving them unscored; what they do not judge they leave
    # unscored themselves (`unscored`). Every other probe's infrastructure errors unscore its tests.
    judges_infra_errors: bool = False

    def content_sha256(self) -> str:
        """A hash of what this item asks: its requests and data, or for a conversation the
        hash its suite gives (`data["item_sha256"]`, e.g. of an agentic task's files). Two runs
        whose item of one id hashes differently asked different things (issue 21, reproduction 9)."""
        given = self.data.get("item_sha256")
        if isinstance(given, str) and given:
            return given
        content = {"requests": self.requests, "data": self.data, "max_tokens": self.max_tokens}
        return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()

    def __post_init__(self) -> None:
        if bool(self.requests) == (self.conversation is not None):
            raise ValueError(f"probe {self.key}: give either requests or a conversation")

    @property
    def key(self) -> tuple[str, str]:
        # The runner sends each key once: a later round of the same item is a probe of its own.
        return (self.suite, self.item if not self.first_sample else f"{self.item}@{self.first_sample}")

    def __str__(self) -> str:
        return self.item


class InfrastructureError(Exception):
    """The endpoint could not be reached or kept failing: not the model's fault, not scored."""


def unscored(subject: str, errors: Sequence[RequestError], why: str = "the endpoint failed") -> InfrastructureError:
    """The error that leaves a test unscored because of `errors` (infrastructure failures) of the
    requests `subject` names: the run is then incomplete, never passed and never failed on them."""
    details = "; ".join(error.describe() for error in errors[:3])
    return InfrastructureError(
        f"[layer: infra] {subject}: not scored, {why}: {details}. "
        "The run is marked incomplete; rerun with --k3-resume to send only the missing requests."
    )


class ApiRejection(AssertionError):
    """The server answered a request the suite considers valid with a 4xx."""


class ParserRefusal(AssertionError):
    """The server's own output parser refused what the model wrote (llama.cpp's HTTP 500
    "does not match the expected ... format"), on every attempt: what an agent gets instead
    of an answer, a fault of the parser layer, not of the model or the transport."""


@dataclass
class SampleResult:
    sample: int
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    # What a conversation worked out along the way (e.g. a sandbox execution), keyed by name.
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass
class ProbeResult:
    probe: Probe
    samples: list[SampleResult]

    @property
    def infra_errors(self) -> list[RequestError]:
        """Failures that say nothing about the deployment's conformance."""
        return [
            outcome
            for sample in self.samples
            for outcome in sample.outcomes.values()
            if isinstance(outcome, RequestError)
            and outcome.error_class is ErrorClass.INFRA
            and not (self.probe.status_errors_are_results and outcome.http_status == INTERNAL_SERVER_ERROR)
        ]

    def outcome(self, step: str, sample: int | None = None) -> Outcome:
        """One step's outcome of sample `sample` (its absolute index; the probe's first sample when None)."""
        first = self.probe.first_sample
        return self.samples[(first if sample is None else sample) - first].outcomes[step]

    def completion(self, step: str, sample: int | None = None) -> Completion:
        """The completion of one step; a 4xx fails the test as an `api` fault, a refusal of
        the server's parser as a `parser` fault."""
        __tracebackhide__ = True
        outcome = self.outcome(step, sample)
        if isinstance(outcome, RequestError) and outcome.error_class is ErrorClass.PARSER:
            raise ParserRefusal(
                f"[layer: parser] expected a completion for {self.probe.suite}/{self.probe.item} step {step!r}; "
                f"got: the server's parser refused the model's output: {outcome.describe()}"
            )
        if isinstance(outcome, RequestError):
            raise ApiRejection(
                f"[layer: api] expected a completion for {self.probe.suite}/{self.probe.item} step {step!r}; "
                f"got: the server rejected the request: {outcome.describe()}"
                + (f"\n  body: {outcome.body}" if outcome.body else "")
            )
        return outcome

    def completions(self, step: str) -> list[Completion]:
        return [self.completion(step, sample.sample) for sample in self.samples]


def probe_of(item: pytest.Item) -> Probe | None:
    """The probe a test is parametrized with; None for tests that are not k3conformance items."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    for value in callspec.params.values():
        if isinstance(value, Probe):
            return value
    return None
