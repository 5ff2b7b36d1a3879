"""One verdict per suite from the gate's own findings, with the rule named; the chart's title fits."""

from __future__ import annotations

from k3conformance.gate.report import chart_title
from k3conformance.gate.settings import GateSettings
from k3conformance.gate.suite_verdicts import suite_verdicts
from k3conformance.gate.verdict import ABOUT_ACCURACY, ABOUT_RATE, CheckRegression, Finding, GateResult, settle


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
