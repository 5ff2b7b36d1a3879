"""The load lane's verdict (k3conformance/checks/load.py) is a pure function of the two
phases' tallies: only a check that never failed alone and failed under load is its finding;
only strict-schema requests answered alone, unanswered under load and a server unreachable
afterwards are a crash."""

from __future__ import annotations

import pytest
from stub_server import MODEL, send, serve_stub

from k3conformance.checks.failures import ConformanceFailure
from k3conformance.checks.load import (
    STREAM_CHECKS,
    Answering,
    PhaseTally,
    check_holds_under_load,
    check_strict_schemas_answered_under_load,
    require_answered,
    tally,
)
from k3conformance.endpoint.completion import Completion
from k3conformance.endpoint.errors import ErrorClass, RequestError
from k3conformance.probes.probe import InfrastructureError


def _tally(streams: int, failures: int) -> PhaseTally:
    tally = PhaseTally()
    for position in range(streams):
        tally.add(ConformanceFailure("parser", "a call", "none") if position < failures else None)
    return tally


def test_a_check_failing_only_under_load_fails_with_both_rates() -> None:
    with pytest.raises(ConformanceFailure) as failure:
        check_holds_under_load("calls_match_expected", _tally(29, 0), _tally(32, 5), 32)
    assert failure.value.layer == "parser"
    message = str(failure.value)
    assert "5 of 32 streams failed at concurrency 32" in message
    assert "0 of 29 streams at concurrency 1" in message


@pytest.mark.parametrize(("alone", "loaded"), [(0, 0), (3, 3), (2, 9)])
def test_a_check_failing_alone_too_or_never_is_not_the_lanes_finding(alone: int, loaded: int) -> None:
    check_holds_under_load("calls_match_expected", _tally(29, alone), _tally(32, loaded), 32)


def test_a_lane_check_counts_only_the_streams_whose_item_it_concerns() -> None:
    one_call = {"expected_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]}
    two_calls = {
        "expected_calls": [*one_call["expected_calls"], {"name": "get_weather", "arguments": {"city": "Rome"}}]
    }
    refused = RequestError(ErrorClass.API, "APIStatusError", "HTTP 500", 1, 500)
    answers = [(refused, one_call), (refused, two_calls), (refused, two_calls)]
    parallel = tally(STREAM_CHECKS["parallel_calls"], answers, {})
    assert (parallel.streams, parallel.failures, parallel.layers) == (2, 2, {"api": 2})
    assert tally(STREAM_CHECKS["calls_match_expected"], answers, {}).streams == 3


# The strict phase's crash rule (the module's docstring): what went unanswered, alone and under
# load, and whether the server answered a plain request afterwards.
ANSWER = Completion("ok", "thinking", "reasoning_content", [], "stop", None, "kimi-k3", 0.1)
GONE = RequestError(ErrorClass.INFRA, "ConnectionError", "Connection refused", 4)
DEAD = RequestError(ErrorClass.INFRA, "InternalServerError", "server unavailable", 4, 503)
REFUSED = RequestError(ErrorClass.API, "BadRequestError", "strict tools are not supported", 1, 400)


def _phase(requests: int, unanswered: int) -> Answering:
    return Answering.of([GONE] * unanswered + [ANSWER] * (requests - unanswered))


def test_a_crash_only_under_load_is_the_lanes_finding_with_both_rates() -> None:
    with pytest.raises(ConformanceFailure) as failure:
        check_strict_schemas_answered_under_load(_phase(32, 0), _phase(32, 20), DEAD, 32)
    assert failure.value.layer == "api"
    message = str(failure.value)
    assert "alone: 0 of 32 failed" in message
    assert "under load 20 of 32 unanswered, server unreachable afterwards" in message


def test_a_transient_5xx_that_a_retry_fixes_is_an_answer() -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": True}
    with serve_stub(["503", "drop"]) as (url, _):
        outcome, attempts = send(url, body)
    assert attempts == 3
    loaded = Answering.of([outcome, *[ANSWER] * 31])
    assert loaded.unanswered == []
    # Even with the server gone afterwards: what every request got was an answer.
    with pytest.raises(InfrastructureError):
        check_strict_schemas_answered_under_load(_phase(32, 0), loaded, DEAD, 32)
    check_strict_schemas_answered_under_load(_phase(32, 0), loaded, ANSWER, 32)


def test_a_rejection_is_an_answer_not_a_crash() -> None:
    check_strict_schemas_answered_under_load(_phase(32, 0), Answering.of([REFUSED] * 32), REFUSED, 32)


@pytest.mark.parametrize(
    ("alone", "loaded", "liveness"),
    [
        # unanswered one at a time too: the deployment or the path to it fails without load
        (1, 32, DEAD),
        (32, 32, GONE),
        # unanswered under load, yet answering afterwards: load shed, or an outage that passed
        (0, 5, ANSWER),
        # everything answered under load, the server gone afterwards: no contrast to show
        (0, 0, DEAD),
    ],
)
def test_unanswered_requests_without_the_crash_contrast_are_not_scored(
    alone: int, loaded: int, liveness: RequestError | Completion
) -> None:
    with pytest.raises(
        InfrastructureError, match=r"^\[layer: infra\] the load lane's strict-schema requests: not scored"
    ):
        check_strict_schemas_answered_under_load(_phase(32, alone), _phase(32, loaded), liveness, 32)


def test_the_tool_streams_leave_their_unanswered_requests_unscored() -> None:
    require_answered("load/streaming-tool-calls", [ANSWER, REFUSED])
    with pytest.raises(InfrastructureError, match=r"^\[layer: infra\] load/streaming-tool-calls: not scored"):
        require_answered("load/streaming-tool-calls", [ANSWER, GONE])
