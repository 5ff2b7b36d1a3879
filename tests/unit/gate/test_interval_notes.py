"""An accuracy interval wholly beyond the margin beside a verdict that is not FAIL must say why,
wherever the interval is shown (issue 22). The interval is the plain one-sided pair; FAIL also
needs the FAIL test's p-value, Holm-adjusted over the gate's tests. Reproduction: weight noise
0.05 on llama.cpp, seed 1235, 32 items, 11 right only on the baseline and 2 only on the
candidate: [-45.3, -9.7] pts, p 0.022 -> 0.065 after Holm over three tests, INCONCLUSIVE.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from k3conformance.gate.matrix import cell_text
from k3conformance.gate.report import NOTE_MARK, gate_document, markdown_report, text_report
from k3conformance.gate.settings import GateSettings
from k3conformance.gate.suite_verdicts import suite_verdicts
from k3conformance.gate.verdict import judge
from k3conformance.runs.schema import validate_summary
from k3conformance.runs.stored import StoredRun
from k3conformance.stats.paired import FAIL, ItemTotals, compare_scores

MARGIN, ALPHA = 0.03, 0.05


def paired(baseline_only: int, candidate_only: int, items: int) -> tuple[dict[str, ItemTotals], dict[str, ItemTotals]]:
    """Binary items: `baseline_only` right on the baseline only, `candidate_only` on the candidate only."""
    baseline = {f"item-{i}": ItemTotals(1, float(i < baseline_only)) for i in range(items)}
    candidate = {
        f"item-{i}": ItemTotals(1, float(baseline_only <= i < baseline_only + candidate_only)) for i in range(items)
    }
    return baseline, candidate


def test_the_reproduction_says_why_it_is_not_fail() -> None:
    comparison = compare_scores(*paired(11, 2, 32), margin=MARGIN, alpha=ALPHA)
    assert comparison is not None
    assert comparison.verdict == FAIL and comparison.not_fail_because is None
    adjusted = comparison.adjusted(comparison.p_value * 3, tests=3)
    assert adjusted.verdict == "INCONCLUSIVE"
    assert round(adjusted.lower * 100, 1) == -45.3 and round(adjusted.upper * 100, 1) == -9.7
    assert adjusted.not_fail_because is not None
    assert "Holm-adjusted over 3 tests 0.065 > α 0.05" in adjusted.not_fail_because
    assert "p 0.022" in adjusted.not_fail_because


@pytest.mark.parametrize("items", [24, 40, 113])
def test_no_interval_beyond_the_margin_sits_beside_a_verdict_that_is_not_fail_without_a_reason(items: int) -> None:
    """Every split of the discordant items and several family sizes: an interval beyond the
    margin with a verdict that is not FAIL always carries the reason; any other never does."""
    shown = 0
    for baseline_only, candidate_only in itertools.product(range(0, items // 2, 2), range(0, 6)):
        plain = compare_scores(*paired(baseline_only, candidate_only, items), margin=MARGIN, alpha=ALPHA)
        assert plain is not None
        for tests in (1, 3, 9):
            comparison = plain.adjusted(min(1.0, plain.p_value * tests), tests=tests)
            beyond = comparison.upper < -comparison.margin
            if beyond and comparison.verdict != FAIL:
                assert comparison.not_fail_because, (baseline_only, candidate_only, tests)
                shown += 1
            else:
                assert comparison.not_fail_because is None, (baseline_only, candidate_only, tests)
    assert shown, "no case of the grid put an interval beyond the margin beside a verdict that is not FAIL"


def _summary(correct: list[float]) -> dict[str, Any]:
    scores = {
        f"item-{i}": {"samples": 1, "correct": value, "truncated": 0, "looping": 0, "no_answer": 0}
        for i, value in enumerate(correct)
    }
    return {
        "run_id": f"run-{sum(correct)}",
        "shape": "tp8",
        "status": "complete",
        "simulator": False,
        "server_info": {},
        "suites": {"small_model": {"scores": scores, "checks": {}}},
        "datasets": {"small_model": {"items": sorted(scores), "sources": {"fixture:small_model": "sha-1"}}},
    }


def test_every_report_that_shows_the_interval_says_why() -> None:
    """The terminal, gate.md, gate.json and the matrix cell, on the reproduction judged whole:
    one accuracy test and two rate tests make the family of three."""
    baseline = _summary([1.0] * 11 + [0.0] * 21)
    candidate = _summary([0.0] * 11 + [1.0] * 2 + [0.0] * 19)
    result = judge(
        StoredRun(validate_summary(baseline, "b"), None),
        StoredRun(validate_summary(candidate, "c"), None),
        GateSettings(),
    )
    comparison = result.accuracy["small_model"]
    assert comparison.verdict == "INCONCLUSIVE" and comparison.upper < -comparison.margin
    because = comparison.not_fail_because
    assert because is not None and "Holm-adjusted over 3 tests" in because
    text = "\n".join(text_report(result))
    assert f"INCONCLUSIVE{NOTE_MARK}" in text and f"{NOTE_MARK} small_model: {because}" in text
    assert "before the Holm adjustment" in text
    markdown = markdown_report(result)
    assert f"INCONCLUSIVE{NOTE_MARK}" in markdown and "Holm-adjusted over 3 tests" in markdown
    document = gate_document(result)
    assert document["accuracy"]["small_model"]["not_fail_because"] == because
    assert document["suite_verdicts"]["small_model"]["interval_note"] == because
    assert because in cell_text(suite_verdicts(result).suites["small_model"])
    assert any(because in reason for reason in result.reasons)
