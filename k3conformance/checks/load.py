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
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from k3conformance.checks import tool_calls
from k3conformance.checks.failures import ConformanceFailure, Layer, expect
from k3conformance.endpoint.completion import Completion
from k3conformance.endpoint.errors import RequestError

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
