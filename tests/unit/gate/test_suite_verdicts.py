"""One verdict per suite from the gate's own findings, with the rule named; the chart's title fits."""

from __future__ import annotations

from types import SimpleNamespace

from k3conformance.gate.matrix import cell_text, deciding_rules
from k3conformance.gate.report import chart_title
from k3conformance.gate.sequential.apply import apply_sequential
from k3conformance.gate.settings import GateSettings
from k3conformance.gate.suite_verdicts import RULE_CHECK, RULE_DECIDED, suite_verdicts
from k3conformance.gate.verdict import (
    ABOUT_ACCURACY,
    ABOUT_COVERAGE,
    ABOUT_RATE,
    CheckRegression,
    Finding,
    GateResult,
    settle,
)


def result_with(findings: list[Finding], **fields: object) -> GateResult:
    result = GateResult(baseline="tp8/" + "b" * 40, candidate="ep32-megamoe/" + "c" * 60, settings=GateSettings())
    for name, value in fields.items():
        setattr(result, name, value)
    settle(result, findings)
    return result


def test_a_monitor_fail_is_the_suite_verdict_and_names_its_rule() -> None:
    sequential = {"agentic_coding": {"stop": {"verdict": "FAIL", "by": "looping monitor", "items": 6, "look": 1}}}
    findings = [
        Finding(
            "FAIL",
            "agentic_coding: sequential FAIL by the looping monitor after 6 items",
            "agentic_coding",
            ABOUT_ACCURACY,
        ),
        Finding(
            "INCONCLUSIVE",
            "agentic_coding: looping rate 0.0% → 50.0%, above the 2% floor",
            "agentic_coding",
            ABOUT_RATE,
        ),
        Finding("INCONCLUSIVE", "math: accuracy +0.0 pts", "math", ABOUT_ACCURACY),
        Finding("FAIL", "tool_calls/parallel[stream] passes on the baseline and fails on the candidate"),
        Finding("INCOMPLETE", "the candidate run is interrupted: rerun with --k3-resume to finish it"),
    ]
    regression = CheckRegression("tool_calls", "parallel[stream]", 5, 2, 3, None)
    result = result_with(findings, sequential=sequential, regressions=[regression])
    verdicts = suite_verdicts(result)
    agentic = verdicts.suites["agentic_coding"]
    assert agentic.verdict == "FAIL"
    assert agentic.decided_by[0].rule == "sequential gate: looping monitor"
    assert verdicts.suites["math"].verdict == "INCONCLUSIVE"
    tool_calls = verdicts.suites["tool_calls"]
    assert tool_calls.verdict == "FAIL" and tool_calls.failing_checks == ["parallel[stream]"]
    assert tool_calls.decided_by[0].rule == "conformance check regression"
    assert [rule.verdict for rule in verdicts.run_rules] == ["INCOMPLETE"]
    # Every finding is in exactly one place, and the worst of them is the gate's verdict.
    placed = sum(len(entry.decided_by) for entry in verdicts.suites.values()) + len(verdicts.run_rules)
    assert placed == len(findings) and verdicts.verdict == result.verdict == "FAIL"


def test_the_chart_title_is_wrapped_to_fit_and_names_the_deciding_rules() -> None:
    sequential = {"agentic_coding": {"stop": {"verdict": "FAIL", "by": "looping monitor", "items": 6, "look": 1}}}
    finding = Finding(
        "FAIL", "agentic_coding: sequential FAIL by the looping monitor", "agentic_coding", ABOUT_ACCURACY
    )
    result = result_with([finding], sequential=sequential)
    title = chart_title(result, suite_verdicts(result), simulated=True)
    assert all(len(line) <= 110 for line in title.splitlines())
    assert "agentic_coding: sequential gate: looping monitor" in title and "SIMULATOR" in title
    assert result.candidate in title.replace("\n", "")


DECIDED = "the gate's verdict was already FAIL (agentic_coding: sequential FAIL by the looping monitor after 12 items)"


def test_a_suite_the_decided_verdict_stopped_says_so_not_coverage() -> None:
    """math, left unjudged because agentic_coding's FAIL decided the gate, is INCOMPLETE with the
    rule and the place that decided it, not "INCOMPLETE +0.0 [-67.1, +67.1] by coverage"."""
    paths = {"math": {"stop": None, "items": 3, "max_items": 41, "blocked_by": None, "left_unjudged": DECIDED}}
    coverage = Finding("INCOMPLETE", "math: the candidate scored 3 of the baseline's 41 items", "math", ABOUT_COVERAGE)
    result = result_with([coverage])
    baseline = SimpleNamespace(item_totals=lambda suite: {})
    apply_sequential(result, paths, baseline)  # type: ignore[arg-type]  # only item_totals is read
    math = suite_verdicts(result).suites["math"]
    assert math.verdict == "INCOMPLETE"
    assert [decision.rule for decision in math.decided_by] == [RULE_DECIDED]
    assert math.not_run == f"{DECIDED}; 3 of its items had been sent"
    assert cell_text(math) == f"INCOMPLETE: not run to the end, {DECIDED}; 3 of its items had been sent"
    assert "coverage" not in cell_text(math)


def test_a_rule_that_decides_a_cell_several_times_shows_once_with_a_count() -> None:
    checks = ["tool_streams_under_load", "strict_schemas_answered_under_load", "parallel_calls_under_load", "x"]
    findings = [Finding("FAIL", f"load/{check} passes on the baseline and fails on the candidate") for check in checks]
    regressions = [CheckRegression("load", check, 4, 4, 0, None) for check in checks]
    load = suite_verdicts(result_with(findings, regressions=regressions)).suites["load"]
    assert deciding_rules(load) == [f"{RULE_CHECK} ×4"]
    assert cell_text(load) == f"FAIL by {RULE_CHECK} ×4"
    # The checks are named where the cell opens (the details: one row per decision, and the list).
    assert load.failing_checks == checks and len(load.decided_by) == 4
