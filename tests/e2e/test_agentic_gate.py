"""The agentic coding suite at its full size, gated fixed-size against a tp8 baseline on the
reference deployment (a simulator): EP32 with MegaMoE fails on accuracy as well as on
looping, through the length mechanism alone; EP32 with DeepEP, a couple of points below
tp8 without loops, does not fail."""

from __future__ import annotations

import json
from typing import Any

import pytest
from run_files import copy_suites

# A loop runs to the token limit: a smaller limit keeps the looping turns cheap and changes
# nothing else (the loop risk follows what the healthy model would have written).
COMMON = ("--k3-max-tokens", "8192", "--k3-sequential=off", "--k3-results-dir", "out", "-p", "no:cacheprovider")
SUITES = ("test_agentic_coding.py", "test_math.py")
# The default run gates six accuracy suites with three tests each (accuracy, looping,
# truncation), all in one Holm family; Holm's adjustment never exceeds this many times the
# p-value, so a p-value under alpha over this count fails the default run's gate too.
DEFAULT_GATE_TESTS = 6 * 3
ALPHA = 0.05


def gate_of(project: pytest.Pytester, profile: str) -> dict[str, Any]:
    result = project.runpytest(*SUITES, "--k3-endpoint", f"reference:{profile}", "--k3-baseline", "tp8", *COMMON)
    (gate_file,) = (project.path / "out" / f"reference-{profile}").glob("*/gate.json")
    gate: dict[str, Any] = json.loads(gate_file.read_text())
    assert result.ret == (1 if gate["fails"] else 0)
    return gate


def test_megamoe_fails_on_accuracy_and_looping_and_deepep_does_not_fail(pytester: pytest.Pytester) -> None:
    copy_suites(pytester.path, SUITES)
    baseline = pytester.runpytest(
        *SUITES, "--k3-endpoint", "reference:tp8", "--k3-shape", "tp8", "--k3-save-baseline", *COMMON
    )
    assert baseline.ret == 0

    megamoe = gate_of(pytester, "ep32-megamoe")
    accuracy = megamoe["accuracy"]["agentic_coding"]
    assert megamoe["verdict"] == "FAIL"
    # The 60 authored tasks and the real-repository pool's default sample of 12.
    assert accuracy["items"] == 72 and accuracy["verdict"] == "FAIL"
    assert accuracy["p_value"] * DEFAULT_GATE_TESTS <= ALPHA
    # Every lost task is a looping one: the loop is cut at the token limit, so the change
    # the task needed is never written.
    assert accuracy["candidate_only_right"] == 0 and accuracy["baseline_only_right"] >= 10
    looping = megamoe["rates"]["agentic_coding"]["looping"]
    assert looping["verdict"] == "FAIL" and looping["baseline_events"] == 0
    assert looping["candidate_events"] >= accuracy["baseline_only_right"]
    # Math's outputs are mostly under the loop's onset; the few long worked solutions over it
    # can loop (the length decides, not the suite), and only those are lost: math looks fine.
    math = megamoe["accuracy"]["math"]
    assert math["verdict"] != "FAIL" and math["candidate_only_right"] == 0
    math_loops = megamoe["rates"]["math"]["looping"]["candidate_events"]
    assert math["baseline_only_right"] <= math_loops <= 0.02 * math["items"]

    deepep = gate_of(pytester, "ep32-deepep")
    # Not a FAIL; INCONCLUSIVE still fails the session, as strict mode (the default) says.
    assert deepep["verdict"] != "FAIL"
    assert deepep["rates"]["agentic_coding"]["looping"]["candidate_events"] == 0
