"""What a release engineer and a pipeline read from a gated run: one verdict per suite with the
rules that decided it (gate.json, gate.md), the gate as a JUnit test case, accuracy items whose
outcome is said in JUnit, on the reference deployment (a simulator)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree
from pathlib import Path
from typing import Any

import pytest
from run_files import copy_suites, outcomes

from k3conformance.formatting import markdown_text

COMMON = ("--k3-limit", "12", "--k3-max-tokens", "8192", "--k3-results-dir", "out", "-p", "no:cacheprovider")
SUITES = ("test_agentic_coding.py", "test_math.py")


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    copy_suites(pytester.path, SUITES)
    baseline = pytester.runpytest(
        *SUITES,
        "--k3-endpoint",
        "reference:tp8",
        "--k3-shape",
        "tp8",
        "--k3-save-baseline",
        "--k3-subset-baseline",
        *COMMON,
    )
    assert baseline.ret == 0
    return pytester


def shape_run(project: pytest.Pytester, shape: str) -> Path:
    (run_dir,) = (path for path in (project.path / "out" / shape).iterdir() if path.is_dir())
    return run_dir


def cases(junit: Path) -> dict[str, ElementTree.Element]:
    root = ElementTree.parse(junit).getroot()
    return {f"{case.get('classname')}::{case.get('name')}": case for case in root.iter("testcase")}


def properties(case: ElementTree.Element) -> dict[str, str]:
    return {prop.get("name", ""): prop.get("value", "") for prop in case.iter("property")}


def test_megamoe_gate_json_junit_and_markdown_tell_one_story(project: pytest.Pytester) -> None:
    result = project.runpytest(
        *SUITES, "--k3-endpoint", "reference:ep32-megamoe", "--k3-baseline", "tp8", "--junitxml=junit.xml", *COMMON
    )
    run_dir = shape_run(project, "reference-ep32-megamoe")
    gate: dict[str, Any] = json.loads((run_dir / "gate.json").read_text())
    assert gate["verdict"] == "FAIL" and result.ret == 1
    agentic = gate["suite_verdicts"]["agentic_coding"]
    # The suite's own verdict already includes the rule that failed it, named.
    assert agentic["verdict"] == "FAIL"
    failing_rules = [rule["rule"] for rule in agentic["decided_by"] if rule["verdict"] == "FAIL"]
    assert failing_rules and all(rule for rule in failing_rules)
    assert any("looping" in rule for rule in failing_rules), failing_rules
    # The worst suite verdict (or run rule) is the gate's: the same settle as the gate itself.
    severity = {"PASS": 0, "INCONCLUSIVE": 1, "INCOMPLETE": 2, "FAIL": 3}
    everything = [entry["verdict"] for entry in gate["suite_verdicts"].values()]
    everything += [rule["verdict"] for rule in gate["run_rules"]]
    assert max(everything, key=severity.__getitem__) == gate["verdict"]
    assert agentic["effect"] is not None and len(agentic["interval"]) == 2
    markdown = (run_dir / "gate.md").read_text()
    assert "### Verdict per suite" in markdown
    (row,) = [line for line in markdown.splitlines() if line.startswith("| agentic\\_coding") and "FAIL" in line]
    assert markdown_text(failing_rules[0]) in row

    junit = cases(project.path / "junit.xml")
    gate_case = junit["k3conformance::gate"]
    failure = gate_case.find("failure")
    assert failure is not None and "gate FAIL" in (failure.get("message", "") + (failure.text or ""))
    assert properties(gate_case)["k3_gate_verdict"] == "FAIL"
    # Only the gate fails (every test passed; the sequential gate skipped what it no longer needed).
    assert result.parseoutcomes()["failed"] == 1
    # A looping agentic task is not told to pass silently: its outcome is a property of its case.
    agent_cases = [case for name, case in junit.items() if "test_task_solved" in name and case.find("skipped") is None]
    said = [properties(case).get("k3_outcome", "") for case in agent_cases]
    assert agent_cases and all(said), "every scored item carries its outcome"
    looping = [properties(case)["k3_outcome"] for case in agent_cases if "k3_looping" in properties(case)]
    assert looping and all("looping" in outcome and not outcome.startswith("solved:") for outcome in looping)
    # Each looping agentic item records its kind of loop (loop_kinds was {} with looping: 1).
    scored: list[dict[str, Any]] = [
        record["score"]
        for record in outcomes(project.path / "out")
        if record["suite"] == "agentic_coding" and isinstance(record.get("score"), dict)
    ]
    looped = [score for score in scored if score["looping"]]
    assert looped and all(sum(score["loop_kinds"].values()) >= score["looping"] for score in looped)


def test_fail_unsolved_fails_items_that_are_not_clean(project: pytest.Pytester) -> None:
    result = project.runpytest(
        *SUITES, "--k3-endpoint", "reference:ep32-megamoe", "--k3-fail-unsolved", "--junitxml=junit.xml", *COMMON
    )
    junit = cases(project.path / "junit.xml")
    failed = {name: case for name, case in junit.items() if case.find("failure") is not None}
    assert failed, "the MegaMoE shape loops on some agentic tasks"
    for case in failed.values():
        outcome = properties(case)["k3_outcome"]
        assert not outcome.startswith("solved:") or "looping" in outcome or "truncated" in outcome
        failure = case.find("failure")
        assert failure is not None and "[layer: model]" in (failure.get("message", "") + (failure.text or ""))
    clean = [case for case in junit.values() if case.find("failure") is None]
    assert all(
        properties(case)["k3_outcome"].startswith("solved:") for case in clean if "k3_outcome" in properties(case)
    )
    # The suite tables still measure: the accuracy is not turned into a pass rate.
    assert result.ret == 1
    summary = json.loads((shape_run(project, "reference-ep32-megamoe") / "summary.json").read_text())
    assert summary["suites"]["agentic_coding"]["failed"] == 0
