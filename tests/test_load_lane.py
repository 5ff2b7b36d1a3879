"""The load lane (suites/test_load.py): a fault that needs many streams in flight passes the
tool_calls suite at concurrency 1 and fails the lane, with both rates; a healthy deployment
passes both; the lane's verdict is a pure function of the two tallies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from run_files import LOAD_SUITE, copy_suites

from k3conformance.checks.failures import ConformanceFailure
from k3conformance.checks.load import PhaseTally, check_holds_under_load


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


def _outcomes(results: Path) -> dict[str, tuple[str, str]]:
    found = {}
    for path in results.glob("*/*/records-*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record.get("kind") == "outcome":
                name = f"{record['suite']}/{str(record['test']).removeprefix('test_')}"
                name += f"[{record['mode']}]" if record.get("mode") else ""
                found[f"{name}:{record['item']}"] = (record["outcome"], str(record["message"]))
    return found


def _run(pytester: pytest.Pytester, profile: str) -> dict[str, tuple[str, str]]:
    copy_suites(pytester.path, ("test_tool_calls.py", LOAD_SUITE))
    pytester.runpytest_subprocess(
        "--k3-endpoint",
        f"reference:{profile}",
        "--k3-results-dir",
        "out",
        "--k3-concurrency",
        "1",
        "-p",
        "no:cacheprovider",
        "-q",
    )
    outcomes = _outcomes(pytester.path / "out")
    assert outcomes, "the suites did not run"
    return outcomes


def test_the_lane_catches_a_fault_that_needs_concurrent_streams(pytester: pytest.Pytester) -> None:
    outcomes = _run(pytester, "concurrent-empty-tool-deltas")
    failed = {name.partition(":")[0] for name, (outcome, _) in outcomes.items() if outcome != "passed"}
    # At concurrency 1 the tool_calls suite sees nothing; the lane's loaded phase does.
    assert failed == {"load/finish_reason_matches_tool_calls_under_load", "load/calls_match_expected_under_load"}
    message = outcomes["load/calls_match_expected_under_load:streaming-tool-calls"][1]
    assert message.startswith("[layer: parser] expected tool_calls/calls_match_expected to hold with 32 streams")
    assert "0 of 29 streams at concurrency 1" in message


def test_the_lane_passes_a_healthy_deployment(pytester: pytest.Pytester) -> None:
    outcomes = _run(pytester, "tp8")
    assert {outcome for outcome, _ in outcomes.values()} == {"passed"}
    assert any(name.startswith("load/") for name in outcomes)
