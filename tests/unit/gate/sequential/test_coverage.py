"""Coverage under sequential gating (issue 21, reproduction 1): the plan and the committed order
are the baseline's items, whatever selected the run's; only a stop at a look or a monitor on that
order excuses the items after it, never "maximum reached", and never a stop on an order that is
not the baseline's item set."""

from __future__ import annotations

from typing import Any

from gate_mutations import megamoe_case

from k3conformance.gate.sequential.apply import apply_sequential
from k3conformance.gate.sequential.rule import BY_LOOK, BY_MAXIMUM
from k3conformance.gate.sequential.state import SequentialRun
from k3conformance.gate.settings import GateSettings
from k3conformance.gate.verdict import judge
from k3conformance.runs.schema import validate_summary
from k3conformance.runs.stored import StoredRun
from k3conformance.scoring.item_score import ItemScore

SUITE = "agentic_coding"


def runs(kept: int) -> tuple[StoredRun, StoredRun]:
    """The MegaMoE case with the candidate's agentic suite cut to its first `kept` tasks, and its
    conformance regressions taken out, so that coverage decides."""
    baseline, candidate = megamoe_case()
    candidate["suites"]["tool_calls"] = baseline["suites"]["tool_calls"]
    candidate["suites"][SUITE]["scores"] = dict(list(candidate["suites"][SUITE]["scores"].items())[:kept])
    return StoredRun(validate_summary(baseline, "b"), None), StoredRun(validate_summary(candidate, "c"), None)


def path(order: list[str], stop: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "design": {"sizes": [1], "max_items": 1, "samples": []},
        "stop": stop,
        "order": order,
        "max_items": len(order),
        "items": stop["items"] if stop else 0,
        "samples_used": 1,
        "blocked_by": None,
        "requests_saved": 0,
        "output_tokens_saved": 0,
    }


def coverage_findings(baseline: StoredRun, candidate: StoredRun, block: dict[str, Any]) -> list[str]:
    result = judge(baseline, candidate, GateSettings())
    apply_sequential(result, {SUITE: block}, baseline)
    return [reason for reason in result.reasons if "of the baseline's 60 items" in reason]


def test_maximum_reached_after_one_item_keeps_the_coverage_finding() -> None:
    """Reproduction 1: `--k3-max-items 1` was INCONCLUSIVE, exit 0: the stop "maximum reached"
    dropped the finding that 59 of 60 tasks were missing."""
    baseline, candidate = runs(1)
    order = sorted(baseline.item_totals(SUITE))
    stop = {"verdict": "INCONCLUSIVE", "by": BY_MAXIMUM, "items": 1, "look": 1}
    found = coverage_findings(baseline, candidate, path(order, stop))
    assert found and found[0].startswith("INCOMPLETE: agentic_coding: the candidate scored 1 of the baseline's 60")


def test_an_early_stop_on_an_order_of_the_collected_items_only_keeps_the_coverage_finding() -> None:
    """Reproduction 1: the plan was made on the collected items (five node ids, --k3-limit 5)."""
    baseline, candidate = runs(5)
    order = sorted(candidate.item_totals(SUITE))
    stop = {"verdict": "PASS", "by": BY_LOOK, "items": 5, "look": 1}
    assert coverage_findings(baseline, candidate, path(order, stop))


def test_an_early_stop_on_the_baselines_order_excuses_the_items_after_it() -> None:
    baseline, candidate = runs(5)
    order = sorted(baseline.item_totals(SUITE))
    stop = {"verdict": "FAIL", "by": BY_LOOK, "items": 5, "look": 1}
    assert coverage_findings(baseline, candidate, path(order, stop)) == []


def test_the_plan_orders_the_baselines_items_and_an_item_not_collected_blocks_the_rule() -> None:
    baseline, _ = runs(60)
    scored = sorted(baseline.item_totals(SUITE))
    collected = {SUITE: dict.fromkeys(scored[:5], "")}
    run = SequentialRun.start(baseline, GateSettings(), "run-1", collected)
    entry = run.suites[SUITE]
    assert sorted(entry.order) == scored and entry.uncollected == frozenset(scored[5:])
    first_missing = next(item for item in entry.order if item in entry.uncollected)
    for item in entry.order:
        run.expect_tests(SUITE, item)
    for item in entry.order:
        if item in entry.uncollected:
            continue
        score = ItemScore()
        score.add(1.0, answered=True, truncated=False, output_tokens=1)
        assert run.test_done(SUITE, item, score) is None
    assert entry.rule.stop is None and entry.blocked_by == first_missing


def test_the_end_of_the_plans_own_maximum_excuses_the_items_after_it() -> None:
    # A plan sized by power asks for fewer items than the pool holds; a suite that ran them all,
    # undecided, is INCONCLUSIVE (the fixed-size comparison of those items), not missing evidence
    # that a resume would send (the A/A runs at the plans' sizes, 2026-12-06).
    baseline, candidate = runs(5)
    order = sorted(baseline.item_totals(SUITE))
    stop = {"verdict": "INCONCLUSIVE", "by": BY_MAXIMUM, "items": 5, "look": 1}
    assert coverage_findings(baseline, candidate, {**path(order, stop), "maximum_capped_by": None}) == []


def test_a_maximum_an_option_cut_keeps_the_coverage_finding() -> None:
    baseline, candidate = runs(5)
    order = sorted(baseline.item_totals(SUITE))
    stop = {"verdict": "INCONCLUSIVE", "by": BY_MAXIMUM, "items": 5, "look": 1}
    for cut_by in ("--k3-max-items", "--budget"):
        assert coverage_findings(baseline, candidate, {**path(order, stop), "maximum_capped_by": cut_by}), cut_by


def test_the_plans_maximum_on_an_order_of_other_items_keeps_the_coverage_finding() -> None:
    baseline, candidate = runs(5)
    order = sorted(candidate.item_totals(SUITE))
    stop = {"verdict": "INCONCLUSIVE", "by": BY_MAXIMUM, "items": 5, "look": 1}
    assert coverage_findings(baseline, candidate, {**path(order, stop), "maximum_capped_by": None})


def test_the_end_of_the_plans_own_maximum_takes_the_rules_verdict_not_the_fixed_size_one() -> None:
    # The last look's bounds are the design's (calibrated over every look); the fixed-size
    # comparison of the same items would PASS more than α at the margin.
    baseline, candidate = runs(5)
    order = sorted(baseline.item_totals(SUITE))
    stop = {"verdict": "INCONCLUSIVE", "by": BY_MAXIMUM, "items": 5, "look": 1}
    for cut_by, rules in ((None, True), ("--k3-max-items", False)):
        result = judge(baseline, candidate, GateSettings())
        apply_sequential(result, {SUITE: {**path(order, stop), "maximum_capped_by": cut_by}}, baseline)
        ruled = f"INCONCLUSIVE: {SUITE}: sequential INCONCLUSIVE by the {BY_MAXIMUM} after 5 items"
        assert (ruled in result.reasons) is rules, (cut_by, result.reasons)
