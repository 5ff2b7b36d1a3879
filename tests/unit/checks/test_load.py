"""The load lane's verdict (k3conformance/checks/load.py) is a pure function of the two
phases' tallies: only a check that never failed alone and failed under load is its finding."""

from __future__ import annotations

import pytest

from k3conformance.checks.failures import ConformanceFailure
from k3conformance.checks.load import STREAM_CHECKS, PhaseTally, check_holds_under_load, tally
from k3conformance.endpoint.errors import ErrorClass, RequestError


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
