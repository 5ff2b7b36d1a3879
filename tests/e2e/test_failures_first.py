"""Failures first: conformance suites run before accuracy suites (also under xdist), each
conformance failure is printed when it happens, and `-m conformance` / `-m accuracy` split them;
on the reference deployment (a simulator) with a parser that drops every tool call. The load
lane, which can take a deployment down, runs after everything."""

from __future__ import annotations

import pytest
from run_files import LOAD_SUITE, copy_suites

SUITES = ("test_agentic_coding.py", "test_tool_calls.py")
COMMON = ("--k3-limit", "2", "--k3-results-dir", "out", "-p", "no:cacheprovider")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    copy_suites(pytester.path, SUITES)
    return pytester


def first_index(lines: list[str], text: str) -> int:
    return next(index for index, line in enumerate(lines) if text in line)


def test_a_conformance_failure_is_printed_before_any_accuracy_test_runs(project: pytest.Pytester) -> None:
    # The agentic suite is named first, as file order put it first before.
    result = project.runpytest(*SUITES, "--k3-endpoint", "reference:empty-tool-calls", "-v", *COMMON)
    lines = result.stdout.lines
    live = first_index(lines, "k3conformance: FAILED tool_calls/")
    assert "[layer: parser]" in lines[live] and "got" in lines[live]
    assert live < first_index(lines, "test_agentic_coding.py::")
    # The closing tables still list it.
    assert first_index(lines, "FAILED tool_calls ") > live


def test_collected_order_is_kept_on_request(project: pytest.Pytester) -> None:
    result = project.runpytest(*SUITES, "--k3-conformance-first=off", "--collect-only", "-q", *COMMON)
    lines = [line for line in result.stdout.lines if "::" in line]
    assert lines[0].startswith("test_agentic_coding.py::")
    ordered = project.runpytest(*SUITES, "--collect-only", "-q", *COMMON)
    lines = [line for line in ordered.stdout.lines if "::" in line]
    assert lines[0].startswith("test_tool_calls.py::") and lines[-1].startswith("test_agentic_coding.py::")


@pytest.mark.parametrize("order", [(), ("--k3-conformance-first=off",)], ids=["conformance-first", "collected"])
def test_the_load_lane_runs_last_whatever_the_order(pytester: pytest.Pytester, order: tuple[str, ...]) -> None:
    # The lane can take a deployment down: named first, it still comes after the accuracy suite.
    copy_suites(pytester.path, (LOAD_SUITE, *SUITES))
    # In a subprocess: in-process, test_load.py would clash with tests/unit/checks/test_load.py
    # whenever an xdist worker has imported that one first ("import file mismatch").
    result = pytester.runpytest_subprocess(LOAD_SUITE, *SUITES, *order, "--collect-only", "-q", *COMMON)
    lines = [line for line in result.stdout.lines if "::" in line]
    lane = [line.startswith(f"{LOAD_SUITE}::") for line in lines]
    assert any(lane) and lane == sorted(lane)
    assert any(line.startswith("test_agentic_coding.py::") for line in lines)


@pytest.mark.parametrize(
    ("marker", "kept", "left_out"),
    [
        ("conformance", "test_tool_calls.py", "test_agentic_coding.py"),
        ("accuracy", "test_agentic_coding.py", "test_tool_calls.py"),
    ],
)
def test_markers_split_the_suites(project: pytest.Pytester, marker: str, kept: str, left_out: str) -> None:
    result = project.runpytest(*SUITES, "-m", marker, "--collect-only", "-q", "--strict-markers", *COMMON)
    lines = [line for line in result.stdout.lines if "::" in line]
    assert lines and all(line.startswith(kept) for line in lines)
    assert not any(left_out in line for line in lines)


def test_the_order_holds_under_xdist(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess(*SUITES, "--k3-endpoint", "reference:tp8", "-n", "2", "-v", *COMMON)
    assert result.ret == 0
    finished = [line for line in result.stdout.lines if "] PASSED " in line or " PASSED " in line]
    tool_lines = [index for index, line in enumerate(finished) if "test_tool_calls.py::" in line]
    agent_lines = [index for index, line in enumerate(finished) if "test_agentic_coding.py::" in line]
    assert tool_lines and agent_lines
    # Each worker runs its conformance share first: the first result is a conformance one.
    assert min(tool_lines) < min(agent_lines)
