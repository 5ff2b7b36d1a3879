"""Decode context parallelism drifting into gibberish as the context grows (vLLM issue 41623),
gated against a tp8 baseline on the reference deployment (a simulator): the long-context
suites lose accuracy with their length, 8K not at all, and the gate FAILs the layout; the
short math suite answers as tp8 does. The profile garbles by context position alone
(reference/faults.py, `drift_onset`), never by suite."""

from __future__ import annotations

import json
from typing import Any

import pytest
from run_files import copy_suites

# A DCP layout differs from tp8's, so the shape policy asks for the agentic coding suite too;
# 20 items of each suite keep the run cheap (5 of each long-context task kind a length).
COMMON = (
    "--k3-limit", "20", "--k3-max-tokens", "8192", "--k3-sequential=off", "--k3-results-dir", "out",
    "-p", "no:cacheprovider",
)  # fmt: skip
SUITES = ("test_long_context.py", "test_math.py", "test_agentic_coding.py")


def test_dcp_drift_loses_long_context_accuracy_with_length_and_the_gate_fails_it(pytester: pytest.Pytester) -> None:
    copy_suites(pytester.path, SUITES)
    baseline = pytester.runpytest(
        *SUITES, "--k3-endpoint", "reference:tp8", "--k3-shape", "tp8", "--k3-save-baseline", "--k3-subset-baseline",
        *COMMON,
    )  # fmt: skip
    assert baseline.ret == 0

    result = pytester.runpytest(
        *SUITES, "--k3-endpoint", "reference:dcp-context-drift", "--k3-baseline", "tp8", *COMMON
    )
    (gate_file,) = (pytester.path / "out" / "reference-dcp-context-drift").glob("*/gate.json")
    gate: dict[str, Any] = json.loads(gate_file.read_text())
    # Accuracy suites score, they do not fail tests: only the gate fails the session.
    assert result.ret == 1 and gate["fails"]
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 1 and "error" not in outcomes  # the gate's own test case
    accuracy = gate["accuracy"]
    short, middle, long = (accuracy[f"long_context_{k}k"] for k in (8, 32, 128))
    assert short["difference"] == 0.0
    assert long["difference"] < middle["difference"] < 0.0
    # 20 items a length reach a FAIL after Holm (measured: 128K 15/20 -> 0/20, -75.0 pts
    # [-88.1, -52.0]; 32K 17/20 -> 8/20, -45.0 pts [-63.9, -25.6]; 8K 20/20 both).
    assert gate["verdict"] == "FAIL" and long["verdict"] == "FAIL" and short["verdict"] != "FAIL"
    assert long["upper"] < -long["margin"]
    # Gibberish, not a loop: the repetition monitor sees nothing; only accuracy falls.
    assert gate["rates"]["long_context_128k"]["looping"]["candidate_events"] == 0
    # Short prompts and agent turns never reach the drift: they answer as on tp8.
    assert accuracy["math"]["difference"] == 0.0 and accuracy["agentic_coding"]["difference"] == 0.0
