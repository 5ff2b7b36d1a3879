"""What a pipeline reading the test report (JUnit XML, the terminal's counts) is told.

Two things the exit status alone carried before: the gate's verdict, now a test case of its own
(`k3conformance::gate`, failed unless the verdict is PASS), and the outcome of an accuracy item.

An accuracy test passes whenever its answer could be scored: a wrong answer is a data point for
the gate, not a failed test, or every run would be red at any real accuracy (68% on coding is
32% red tests). So its report carries `k3_outcome` (solved, partly solved, unsolved), and
`k3_looping` / `k3_truncated` when any sample looped or was cut off, as properties: JUnit
writes them next to the test case. With --k3-fail-unsolved an item that is not solved in every
sample, or that looped or was truncated, fails (layer `model`), for pipelines that show JUnit
per test and must not show such an item green; the session then fails on it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from k3conformance.gate.verdict import GateResult

GATE_NODEID = "k3conformance::gate"
OUTCOME_PROPERTY = "k3_outcome"
SOLVED = "solved"
PARTLY_SOLVED = "partly solved"
UNSOLVED = "unsolved"


def item_outcome(score: Mapping[str, Any]) -> tuple[str, list[tuple[str, object]]]:
    """An accuracy item's outcome in words, and the properties that say it."""
    samples = int(score.get("samples", 0))
    correct = float(score.get("correct", 0))
    looping, truncated = int(score.get("looping", 0)), int(score.get("truncated", 0))
    outcome = SOLVED if samples and correct >= samples else UNSOLVED if correct <= 0 else PARTLY_SOLVED
    text = f"{outcome}: {correct:g} of {samples} samples correct"
    properties: list[tuple[str, object]] = []
    if looping:
        text += f", {looping} looping"
        properties.append(("k3_looping", looping))
    if truncated:
        text += f", {truncated} truncated"
        properties.append(("k3_truncated", truncated))
    return outcome, [(OUTCOME_PROPERTY, text), *properties]


def is_clean(score: Mapping[str, Any]) -> bool:
    """Solved in every sample, with no loop and no cut-off."""
    outcome, _ = item_outcome(score)
    return outcome == SOLVED and not score.get("looping") and not score.get("truncated")


def mark_item(item: pytest.Item, report: pytest.TestReport, outcome: Mapping[str, Any], fail_unsolved: bool) -> None:
    """Give a scored accuracy test its outcome properties; with --k3-fail-unsolved, fail its call
    when it is not clean. The properties go on the item: JUnit XML reads them from the teardown
    report, which copies the item's."""
    score = outcome.get("score")
    if report.when != "call" or not isinstance(score, Mapping) or not score.get("samples"):
        return
    _, properties = item_outcome(score)
    item.user_properties.extend(properties)
    if fail_unsolved and report.passed and not is_clean(score):
        report.outcome = "failed"
        report.longrepr = (
            f"[layer: model] {outcome.get('suite')}/{outcome.get('item')}: {properties[0][1]} "
            "(--k3-fail-unsolved: an accuracy item that is not solved in every sample, or that looped or was "
            "truncated, fails; without it the item is measured and the gate judges the suite)"
        )


def gate_case(result: GateResult) -> list[pytest.TestReport]:
    """The gate as a test case: failed unless PASS, its reasons as the failure text. A call report
    and a teardown report, as a test has: JUnit XML writes a case's properties at its teardown."""
    passed = result.verdict == "PASS"
    mode = result.settings.mode
    effect = "fails the session" if result.fails() else f"does not fail the session in {mode} mode"
    lines = [f"gate {result.verdict} ({effect}): {result.candidate} against the baseline {result.baseline}"]
    lines += [f"  {reason}" for reason in result.reasons]
    where = ("k3conformance", None, "gate")
    properties: list[tuple[str, object]] = [
        ("k3_gate_verdict", result.verdict),
        ("k3_gate_fails_session", result.fails()),
        # The policy in force and each difference from the default, as gate.md and gate.json say them.
        ("k3_gate_policy", result.settings.policy_line()),
        ("k3_gate_weaker_policy", "; ".join(entry for entry, easier in result.settings.overrides() if easier)),
    ]
    return [
        pytest.TestReport(
            GATE_NODEID,
            where,
            {"k3conformance": 1},
            "passed" if passed else "failed",
            None if passed else "\n".join(lines),
            "call",
            user_properties=properties,
        ),
        pytest.TestReport(
            GATE_NODEID, where, {"k3conformance": 1}, "passed", None, "teardown", user_properties=properties
        ),
    ]


def report_gate_case(config: pytest.Config, result: GateResult) -> None:
    """Log the gate's test case like any test's: JUnit XML and the terminal's counts get it."""
    for report in gate_case(result):
        config.hook.pytest_runtest_logreport(report=report)
