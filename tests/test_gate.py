"""The gate's verdict from two run summaries, without running anything."""

from __future__ import annotations

import json
from typing import Any

from k3conformance.endpoint.shapes import get_shape, server_args
from k3conformance.gate.decision import GateSettings, gate
from k3conformance.gate.report import markdown_report, text_report
from k3conformance.runs.stored import StoredRun


def summary(
    shape: str = "tp8",
    *,
    status: str = "complete",
    right: int = 90,
    items: int = 100,
    looping: int = 0,
    suites: tuple[str, ...] = ("agentic_coding", "math"),
    server_shape: str | None = "tp8",
    checks: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    scores = {
        f"item-{i}": {
            "samples": 1,
            "correct": float(i < right),
            "truncated": int(i >= items - looping),
            "looping": int(i >= items - looping),
            "no_answer": 0,
        }
        for i in range(items)
    }
    described = get_shape(server_shape) if server_shape else None
    result: dict[str, Any] = {
        "run_id": f"run-{shape}",
        "shape": shape,
        "status": status,
        "simulator": False,
        "server_info": {"get_server_info": server_args(described)} if described else {},
        "suites": {suite: {"scores": scores, "checks": {}} for suite in suites},
    }
    if checks:
        result["suites"]["reasoning"] = {"scores": {}, "checks": checks}
    return result


def run(data: dict[str, Any]) -> StoredRun:
    return StoredRun(data, None)


def test_identical_large_runs_pass() -> None:
    result = gate(run(summary(items=2000, right=1800)), run(summary(items=2000, right=1800)), GateSettings())
    assert result.verdict == "PASS" and not result.fails()
    assert result.reasons == []


def test_looping_alone_fails_the_gate() -> None:
    result = gate(
        run(summary(items=2000, right=1800)), run(summary(items=2000, right=1800, looping=60)), GateSettings()
    )
    assert result.verdict == "FAIL"
    assert any("looping rate 0.0% → 3.0%" in reason for reason in result.reasons)


def test_unfinished_candidate_is_incomplete() -> None:
    result = gate(
        run(summary(items=2000, right=1800)), run(summary(items=2000, right=1800, status="incomplete")), GateSettings()
    )
    assert result.verdict == "INCOMPLETE" and result.fails()
    assert any("--k3-resume" in reason for reason in result.reasons)


def test_a_fail_outranks_incomplete() -> None:
    result = gate(run(summary()), run(summary(right=40, status="incomplete")), GateSettings())
    assert result.verdict == "FAIL"
    assert [reason.split(":")[0] for reason in result.reasons][:2] == ["FAIL", "FAIL"]


def test_unknown_shapes_need_agentic_coding_and_math() -> None:
    """vLLM and llama.cpp do not report their launch arguments: the shape may differ."""
    baseline = summary("vllm-tp8", server_shape=None)
    result = gate(run(baseline), run(summary("vllm-ep8", server_shape=None, suites=("math",))), GateSettings())
    assert result.verdict == "INCOMPLETE"
    assert result.shape is not None and result.shape.missing_suites == ("agentic_coding",)


def test_same_known_shape_needs_no_particular_suite() -> None:
    result = gate(
        run(summary(items=2000, right=1800)), run(summary(items=2000, right=1800, suites=("math",))), GateSettings()
    )
    assert result.shape is not None and result.shape.differences == []
    assert result.verdict == "PASS"


def test_contradicting_shape_label_is_reported() -> None:
    candidate = summary("tp8", server_shape="ep32-megamoe")
    result = gate(run(summary()), run(candidate), GateSettings())
    assert result.shape is not None and result.shape.contradictions
    assert any("but the server reports tp_size=32" in line for line in result.shape.contradictions)


def test_check_regression_and_still_failing_checks() -> None:
    before = {"a[plain]": {"passed": 4, "failed": 0}, "b[plain]": {"passed": 2, "failed": 2}}
    after = {
        "a[plain]": {"passed": 1, "failed": 3, "excerpts": {"api": "x: [layer: api] expected stop"}},
        "b[plain]": {"passed": 0, "failed": 4},
    }
    result = gate(run(summary(checks=before)), run(summary(checks=after)), GateSettings())
    assert [(r.suite, r.check) for r in result.regressions] == [("reasoning", "a[plain]")]
    assert result.verdict == "FAIL"
    assert result.regressions[0].excerpt == "x: [layer: api] expected stop"


def test_nothing_in_common_is_incomplete() -> None:
    result = gate(run(summary(suites=("math",))), run(summary(suites=("coding",))), GateSettings())
    assert result.verdict == "INCOMPLETE"


def test_reports_are_plain_data_and_readable() -> None:
    result = gate(run(summary()), run(summary(right=60, looping=30)), GateSettings(mode="strict"))
    assert json.loads(json.dumps(result.to_dict()))["verdict"] == "FAIL"
    text = "\n".join(text_report(result))
    assert text.startswith("gate: FAIL") and "min detectable drop" in text and "looping" in text
    markdown = markdown_report(result, {"simulator": True})
    assert "| suite " in markdown and "simulator" in markdown


def test_simulator_against_real_deployment_is_noted() -> None:
    simulated = summary()
    simulated["simulator"] = True
    result = gate(run(simulated), run(summary()), GateSettings())
    assert any("simulator" in note for note in result.notes)
