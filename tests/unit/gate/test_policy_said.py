"""Every difference from the default policy is said, and one that makes a verdict easier is marked
"weaker policy": in the verdict line, gate.md, gate.json, the JUnit gate case and the matrix (issue 35)."""

from __future__ import annotations

import json

from gate_mutations import start

from k3conformance.gate.matrix import Matrix, markdown_matrix, matrix_document, text_matrix
from k3conformance.gate.report import json_report, markdown_report, text_report
from k3conformance.gate.settings import GateSettings
from k3conformance.gate.verdict import judge
from k3conformance.run.junit import gate_case
from k3conformance.runs.schema import validate_summary
from k3conformance.runs.stored import StoredRun


def test_per_suite_margins_are_a_weaker_policy_said_everywhere() -> None:
    baseline, candidate, _ = start("deepep-4-samples")
    settings = GateSettings(margins=(("coding", 10.0),), allow_differences=("seed",))
    base = StoredRun(validate_summary(baseline, "b"), None)
    result = judge(base, StoredRun(validate_summary(candidate, "c"), None), settings)
    said = "margin of coding 10 (default 3)"
    assert said in text_report(result)[0] and "weaker policy" in text_report(result)[0]
    assert f"{said} (weaker policy)" in markdown_report(result)
    document = json.loads(json_report(result))
    assert said in document["policy"]["weaker"] and "differences allowed: seed" in document["policy"]["weaker"]
    assert any("weaker policy than the default" in note for note in document["notes"])
    properties = dict(gate_case(result)[1].user_properties)
    assert said in str(properties["k3_gate_weaker_policy"]) and said in str(properties["k3_gate_policy"])
    matrix = Matrix(base, settings=settings)
    assert said in "\n".join(text_matrix(matrix)) and said in markdown_matrix(matrix)
    assert said in matrix_document(matrix)["policy"]["weaker"]


def test_the_default_policy_has_no_overrides_and_a_stricter_one_is_not_weaker() -> None:
    assert GateSettings().overrides() == []
    assert GateSettings(margin=2.0, alpha=0.01).overrides() == [
        ("margin 2 (default 3)", False),
        ("alpha 0.01 (default 0.05)", False),
    ]


def test_the_warn_line_states_the_exit_status_the_verdict_has() -> None:
    warn = GateSettings(gate="warn")
    assert warn.verdict_line("INCOMPLETE").startswith("warn mode, opted into with --k3-gate warn: INCOMPLETE exits 1")
    assert warn.verdict_line("FAIL").startswith("warn mode, opted into with --k3-gate warn: FAIL exits 1")
    assert warn.verdict_line("INCONCLUSIVE").startswith(
        "warn mode, opted into with --k3-gate warn: INCONCLUSIVE exits 0"
    )
    assert "weaker policy: warn mode (default strict)" in warn.verdict_line("PASS")
