"""The load lane (suites/test_load.py): a fault that needs many streams in flight passes the
tool_calls suite at concurrency 1 and fails the lane, with both rates; so does a deployment
that dies with many strict schemas in flight; a healthy deployment passes both."""

from __future__ import annotations

from pathlib import Path

import pytest
from run_files import LOAD_SUITE, copy_suites, outcomes

STRICT_CHECK = "load/strict_schemas_answered_under_load:streaming-tool-calls"


def _outcomes(results: Path) -> dict[str, tuple[str, str]]:
    found = {}
    for record in outcomes(results):
        name = f"{record['suite']}/{str(record['test']).removeprefix('test_')}"
        name += f"[{record['mode']}]" if record.get("mode") else ""
        found[f"{name}:{record['item']}"] = (record["outcome"], str(record["message"]))
    return found


def _run(pytester: pytest.Pytester, profile: str, *extra: str) -> dict[str, tuple[str, str]]:
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
        *extra,
    )
    outcomes = _outcomes(pytester.path / "out")
    assert outcomes, "the suites did not run"
    return outcomes


def test_the_lane_catches_a_fault_that_needs_concurrent_streams(pytester: pytest.Pytester) -> None:
    outcomes = _run(pytester, "concurrent-empty-tool-deltas")
    failed = {name.partition(":")[0] for name, (outcome, _) in outcomes.items() if outcome != "passed"}
    # At concurrency 1 the tool_calls suite sees nothing; the lane's loaded phase does.
    assert failed == {
        "load/finish_reason_matches_tool_calls_under_load",
        "load/calls_match_expected_under_load",
        "load/parallel_calls_under_load",
    }
    message = outcomes["load/calls_match_expected_under_load:streaming-tool-calls"][1]
    assert message.startswith("[layer: parser] expected tool_calls/calls_match_expected to hold with 32 streams")
    assert "0 of 30 streams at concurrency 1" in message
    # Only the 4 items that ask for parallel calls count for parallel_calls, in both phases.
    parallel = outcomes["load/parallel_calls_under_load:streaming-tool-calls"][1]
    assert parallel.startswith("[layer: parser] expected tool_calls/parallel_calls to hold with 32 streams")
    assert "0 of 4 streams at concurrency 1" in parallel


def test_the_lane_catches_a_deployment_that_crashes_under_strict_load(pytester: pytest.Pytester) -> None:
    # No backoff: the crashed server's retries would only wait.
    outcomes = _run(pytester, "strict-schemas-crash-under-load", "--k3-backoff", "0")
    failed = {name for name, (outcome, _) in outcomes.items() if outcome != "passed"}
    # The tool_calls suite (its strict item included) and the lane's tool streams pass; the lane runs
    # last, so the crash costs them nothing.
    assert failed == {STRICT_CHECK}
    message = outcomes[STRICT_CHECK][1]
    assert message.startswith(
        "[layer: api] expected the deployment to keep answering strict-schema tool requests with 32 in flight"
    )
    # The same 32 strict requests one at a time were all answered.
    assert "(alone: 0 of 32 failed); got: under load " in message
    assert "unanswered, server unreachable afterwards" in message


def test_the_lane_passes_a_healthy_deployment(pytester: pytest.Pytester) -> None:
    outcomes = _run(pytester, "tp8")
    assert {outcome for outcome, _ in outcomes.values()} == {"passed"}
    assert STRICT_CHECK in outcomes
