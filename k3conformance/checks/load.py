"""The load lane: the streaming tool-call checks run on the same requests one at a time and
then all at once, and a check that holds alone but breaks under load is a finding of its own.

Some serving bugs live only under concurrency: vLLM issue 54701 (empty tool-call deltas with
6 to 14 streams in flight, 5-30% of requests, never with one stream), TensorRT-LLM PR 17845
(many strict schemas under concurrent guided load). The suites send their requests at
`--k3-concurrency` and judge each answer once, so a fault that hits a share of the requests
only when many are in flight can pass them. The lane counts, per check, how many streams it
fails at concurrency 1 and at `--k3-load-concurrency`, and fails the check's load test when
it never failed alone and failed under load, with both rates and the layer the check named.
A check that fails alone too is the suites' finding, not the lane's.

The strict phase: requests whose one tool is declared `strict: true`, each with a schema of
its own (the tool_schemas corpus), so that a server compiles as many grammars as it has
requests and decodes all of them guided at once, sent one at a time and then
`--k3-load-concurrency` at once, and after them one plain small request (the liveness probe).
TensorRT-LLM PR 17845: under sustained concurrent guided load with strict tool schemas,
sampling tripped a device-side assert on one rank and killed the whole deployment; the same
requests without the grammar ran clean. What a crash looks like from outside is what an
outage looks like (5xx, dropped or refused connections), and everywhere else in the plugin
those are infrastructure errors: retried, and when they persist the test is left unscored and
the run incomplete, never failed and never passed. The lane is where the contrast can tell a
crash from an outage, so the rule for its strict phase is:

- a request counts as unanswered only when it failed through every retry the client makes
  (`--k3-retries`): a 5xx or a cut stream that a retry fixes is an answer, as it is for a
  client in production;
- unanswered requests one at a time too: not the lane's finding (the deployment or the path to
  it fails without load); unscored, the run incomplete, as everywhere else;
- every request answered one at a time, some unanswered with the load in flight, and the
  plain request after the load unanswered as well (the server is gone, not busy): a crash under
  concurrent guided load, a deployment fault of layer `api` with both rates ("alone: 0 of N
  failed; under load K of N unanswered, server unreachable afterwards");
- unanswered under load but the plain request after it answered: a server that shed load or
  an outage that passed, which a black-box client cannot tell from a crash that a supervisor
  restarted within the retries; unscored, the run incomplete (lower the load, or read the
  server's log), never a pass;
- everything answered under load but the plain request after it not: no contrast to show;
  unscored. A 4xx or a parser's refusal is an answer: the server is up and said something.

This is what an operator of SGLang or vLLM sees when the engine dies: SGLang's launcher takes
the whole server down when a scheduler process dies (connections refused), vLLM's engine-dead
state answers every request with a 5xx and /health with 503; either way a plain request fails
too. A live server under load queues requests rather than dropping them (both engines do by
default), so requests unanswered under load with the server answering afterwards are rare, and
left to the person who can read the server's log.

The unanswered requests stay counted among the run's infrastructure errors either way, so a
run whose deployment crashed is marked incomplete as well as failed: requests did go
unanswered, and the gate's FAIL outranks its INCOMPLETE. The lane runs after every other test
(run/ordering.py) so that a crash costs no other suite its evidence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from k3conformance.checks import tool_calls
from k3conformance.checks.failures import ConformanceFailure, Layer, expect
from k3conformance.endpoint.completion import Completion
from k3conformance.endpoint.errors import ErrorClass, RequestError
from k3conformance.probes.probe import unscored

# What one streamed answer is judged by: a tool-call check applied to (completion, the item).
StreamCheck = Callable[[Completion, Mapping[str, Any], Mapping[str, Mapping[str, Any]]], None]


def _finish_reason(completion: Completion, item: Mapping[str, Any], tools: Mapping[str, Mapping[str, Any]]) -> None:
    tool_calls.check_finish_reason_matches_tool_calls(completion, "stream")


def _calls_match(completion: Completion, item: Mapping[str, Any], tools: Mapping[str, Mapping[str, Any]]) -> None:
    tool_calls.check_calls_match_expected(completion, item["expected_calls"], "stream")


def _parallel_calls(completion: Completion, item: Mapping[str, Any], tools: Mapping[str, Mapping[str, Any]]) -> None:
    tool_calls.check_parallel_calls(completion, item["expected_calls"], "stream")


def _every_item(item: Mapping[str, Any]) -> bool:
    return True


def _asks_parallel_calls(item: Mapping[str, Any]) -> bool:
    return len(item["expected_calls"]) > 1


@dataclass(frozen=True)
class LaneCheck:
    """A tool_calls check applied to each stream of the lane whose item it concerns."""

    run: StreamCheck
    applies_to: Callable[[Mapping[str, Any]], bool] = _every_item


# The lane's checks, by the name of the tool_calls check each runs: those a load-sensitive
# profile is shown to break (tests/e2e/test_conformance_faults.py proves every check catches
# something). The rest of the per-stream checks would cost no request more (they read the
# same streams), but no concurrency-only bug known here breaks them, so none could be shown
# to catch anything: one joins with a profile whose load fault breaks it.
STREAM_CHECKS: Mapping[str, LaneCheck] = {
    "finish_reason_matches_tool_calls": LaneCheck(_finish_reason),
    "calls_match_expected": LaneCheck(_calls_match),
    "parallel_calls": LaneCheck(_parallel_calls, _asks_parallel_calls),
}


@dataclass
class PhaseTally:
    """One check's failures among the streams of one phase."""

    streams: int = 0
    failures: int = 0
    layers: dict[Layer, int] = field(default_factory=dict)
    first_failure: str = ""

    def add(self, failure: ConformanceFailure | None) -> None:
        self.streams += 1
        if failure is None:
            return
        self.failures += 1
        self.layers[failure.layer] = self.layers.get(failure.layer, 0) + 1
        self.first_failure = self.first_failure or str(failure)

    @property
    def rate(self) -> str:
        return f"{self.failures} of {self.streams} streams"


def tally(
    check: LaneCheck,
    answers: Sequence[tuple[Completion | RequestError, Mapping[str, Any]]],
    tools: Mapping[str, Mapping[str, Any]],
) -> PhaseTally:
    """How many of a phase's answers `check` fails, among those whose item it concerns; an API
    error fails every check (layer api)."""
    phase = PhaseTally()
    for outcome, item in answers:
        if not check.applies_to(item):
            continue
        if isinstance(outcome, RequestError):
            phase.add(ConformanceFailure(outcome.layer, "a streamed answer", outcome.message))
            continue
        try:
            check.run(outcome, item, tools)
        except ConformanceFailure as failure:
            phase.add(failure)
        else:
            phase.add(None)
    return phase


def check_holds_under_load(name: str, alone: PhaseTally, loaded: PhaseTally, concurrency: int) -> None:
    """Fails when `name` passed every stream sent alone and failed some sent `concurrency` at a time."""
    __tracebackhide__ = True
    layer: Layer = max(loaded.layers, key=lambda found: loaded.layers[found]) if loaded.layers else "api"
    expect(
        alone.failures > 0 or loaded.failures == 0,
        layer=layer,
        expected=(
            f"tool_calls/{name} to hold with {concurrency} streams in flight as it does one at a time "
            f"(alone: {alone.rate} failed)"
        ),
        got=f"{loaded.rate} failed at concurrency {concurrency}, {alone.rate} at concurrency 1; first: {loaded.first_failure}",
        hint="a fault that needs concurrent streams (vLLM issue 54701): compare the server's streaming parser "
        "state across requests; --k3-load-concurrency sets the load",
    )


# One check per test of suites/test_load.py, named like it.
def check_finish_reason_matches_tool_calls_under_load(alone: PhaseTally, loaded: PhaseTally, concurrency: int) -> None:
    __tracebackhide__ = True
    check_holds_under_load("finish_reason_matches_tool_calls", alone, loaded, concurrency)


def check_calls_match_expected_under_load(alone: PhaseTally, loaded: PhaseTally, concurrency: int) -> None:
    __tracebackhide__ = True
    check_holds_under_load("calls_match_expected", alone, loaded, concurrency)


def check_parallel_calls_under_load(alone: PhaseTally, loaded: PhaseTally, concurrency: int) -> None:
    __tracebackhide__ = True
    check_holds_under_load("parallel_calls", alone, loaded, concurrency)


# --- the strict phase: a crash under concurrent guided load ----------------------------------

STRICT_REQUESTS = "the load lane's strict-schema requests"


def unanswered(outcome: Completion | RequestError) -> TypeGuard[RequestError]:
    """Whether the deployment left a request unanswered through every retry: an infrastructure
    error (5xx, a dropped or refused connection, a timeout). A 4xx or a parser's refusal is an
    answer: the server is up and said something."""
    return isinstance(outcome, RequestError) and outcome.error_class is ErrorClass.INFRA


@dataclass
class Answering:
    """How many of a phase's requests the deployment left unanswered."""

    requests: int = 0
    unanswered: list[RequestError] = field(default_factory=list)

    @classmethod
    def of(cls, outcomes: Iterable[Completion | RequestError]) -> Answering:
        phase = cls()
        for outcome in outcomes:
            phase.requests += 1
            if unanswered(outcome):
                phase.unanswered.append(outcome)
        return phase

    @property
    def rate(self) -> str:
        return f"{len(self.unanswered)} of {self.requests}"


def require_answered(subject: str, outcomes: Iterable[Completion | RequestError]) -> None:
    """Leaves the test unscored when any of `outcomes` went unanswered: the rule everywhere but
    in the strict phase, which judges its own."""
    failed = Answering.of(outcomes).unanswered
    if failed:
        raise unscored(subject, failed)


def check_strict_schemas_answered_under_load(
    alone: Answering, loaded: Answering, liveness: Completion | RequestError, concurrency: int
) -> None:
    """The crash rule of the module's docstring: fails (layer api) when every strict request was
    answered alone, some went unanswered under load and the server did not answer afterwards;
    leaves the test unscored when requests went unanswered in any other way."""
    __tracebackhide__ = True
    if alone.unanswered:
        raise unscored(
            STRICT_REQUESTS,
            alone.unanswered,
            f"{alone.rate} went unanswered one at a time too, so the load is not what broke them",
        )
    if unanswered(liveness):
        if not loaded.unanswered:
            raise unscored(
                STRICT_REQUESTS,
                [liveness],
                f"all {loaded.requests} were answered under load, yet the plain request after them was not",
            )
        raise ConformanceFailure(
            "api",
            expected=(
                f"the deployment to keep answering strict-schema tool requests with {concurrency} in flight, "
                f"as it answered them one at a time (alone: {alone.rate} failed)"
            ),
            got=(
                f"under load {loaded.rate} unanswered, server unreachable afterwards "
                f"(a plain request after the load: {liveness.describe()})"
            ),
            hint="a crash under concurrent guided decoding (TensorRT-LLM PR 17845: a device-side assert in the "
            "sampler killed the whole deployment): read the server's log, restart it; --k3-load-concurrency "
            "sets the load",
        )
    if loaded.unanswered:
        raise unscored(
            STRICT_REQUESTS,
            loaded.unanswered,
            f"{loaded.rate} went unanswered with {concurrency} in flight, but the server answered the plain "
            "request after them (load shed, or an outage that passed: not a crash the lane can show)",
        )
