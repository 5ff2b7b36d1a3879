"""The sequential gate's pieces: bounds against published values, the score statistic, looks,
monitors and plans (calibration by simulation is in test_sequential_calibration.py)."""

from __future__ import annotations

import math
import random
from typing import cast

import pytest
from sequential_simulation import exact_crossings

from k3conformance.gate.sequential.chart import look_chart
from k3conformance.gate.sequential.plan import ASSUMED_DISCORDANCE, plan_lines, plan_suite, spread_from
from k3conformance.gate.sequential.rule import BY_LOOK, BY_LOOPING, SequentialSuite
from k3conformance.gate.sequential.state import monitored_floor
from k3conformance.stats.group_sequential import (
    crossing_probabilities,
    design,
    evaluate_look,
    look_sizes,
    obrien_fleming_spent,
    spending_bounds,
)
from k3conformance.stats.monitors import AccuracyMonitor, RateMonitor
from k3conformance.stats.paired import FAIL, INCONCLUSIVE, PASS, ItemTotals, tango_statistic

FIVE = [0.2, 0.4, 0.6, 0.8, 1.0]


def test_bounds_match_the_published_lan_demets_obrien_fleming_values() -> None:
    # Jennison and Turnbull, table 2.3 analogue (one-sided 0.025, 5 equally spaced looks).
    expected = [4.877, 3.357, 2.680, 2.290, 2.031]
    assert spending_bounds(FIVE, 0.025) == pytest.approx(expected, abs=2e-3)


def test_one_look_is_the_fixed_size_test() -> None:
    assert spending_bounds([1.0], 0.05) == pytest.approx([1.6449], abs=1e-4)


def test_each_side_spends_exactly_its_alpha_under_the_null() -> None:
    fail, passed = spending_bounds(FIVE, 0.045), spending_bounds(FIVE, 0.05)
    crossing = crossing_probabilities(FIVE, fail, passed, 0.0)
    assert crossing.fail_total == pytest.approx(0.045, abs=2e-4)
    assert crossing.pass_total == pytest.approx(0.05, abs=2e-4)
    # Per look, the FAIL side spends what the spending function allows.
    spent = [obrien_fleming_spent(t, 0.045) for t in FIVE]
    increments = [b - a for a, b in zip([0.0, *spent], spent, strict=False)]
    assert crossing.fail == pytest.approx(increments, abs=2e-4)


def test_bad_look_fractions_are_refused() -> None:
    with pytest.raises(ValueError, match="increase"):
        spending_bounds([0.5, 0.5, 1.0], 0.05)
    with pytest.raises(ValueError, match="last look"):
        spending_bounds([0.5, 0.9], 0.05)


def test_look_sizes_are_equally_spaced_and_end_at_the_maximum() -> None:
    assert look_sizes(1109, 5) == [222, 444, 665, 887, 1109]
    assert look_sizes(3, 5) == [1, 2, 3]


def test_looks_use_the_fixed_size_gates_tango_statistic() -> None:
    # One statistic for both gates, with its quarter of an item of continuity correction. With m = 0
    # the constrained estimate is (b + c)/2n: Z = (c - b + 1/4) / sqrt(b + c).
    assert tango_statistic(12, 4, 100, 0.0) == pytest.approx((4 - 12 + 0.25) / math.sqrt(16))
    # No discordant item among 200: a loss of 3 points would have shown some, Z = (n m - 1/4) / sqrt(n m (1 - m)).
    assert tango_statistic(0, 0, 200, -0.03) == pytest.approx((200 * 0.03 - 0.25) / math.sqrt(200 * 0.03 * 0.97))
    # Many baseline-only items: strongly negative.
    assert tango_statistic(40, 2, 200, -0.03) < -3
    plan = design(200, 1, margin=0.03, alpha=0.05)
    right, wrong = ItemTotals(1, 1.0), ItemTotals(1, 0.0)
    look = evaluate_look(plan, 0, [right] * 12 + [wrong] * 188, [wrong] * 12 + [right] * 4 + [wrong] * 184)
    assert look.statistic == tango_statistic(12, 4, 200, -0.03)


@pytest.mark.parametrize(("baseline_only", "candidate_only"), [(0.03, 0.0), (0.09, 0.06)])
def test_the_looks_hold_their_error_rates_at_the_margin_exactly_when_capped(
    baseline_only: float, candidate_only: float
) -> None:
    # Capped at 600 items, where simulation put FAIL at the margin at 6.4% (3% discordant, before the
    # continuity correction): the looks' exact crossing probabilities, without the monitors.
    plan = design(600, 5, margin=0.03, alpha=0.05, fail_alpha=0.045)
    fail, passed = exact_crossings(plan, baseline_only, candidate_only)
    # The lattice of few discordant items leaves FAIL a little over its 4.5% share, under the whole 5%.
    assert fail <= 0.049 and passed <= 0.05


def test_a_look_decides_on_the_first_items_of_the_order_only() -> None:
    plan = design(100, 2, margin=0.03, alpha=0.05)
    right, wrong = ItemTotals(1, 1.0), ItemTotals(1, 0.0)
    baseline = [right] * 100
    # The first 50 all lost; the rest all fine: look 1 sees only the losses.
    candidate = [wrong] * 50 + [right] * 50
    look = evaluate_look(plan, 0, baseline, candidate)
    assert look.items == 50 and look.verdict == FAIL and look.statistic < look.fail_bound
    with pytest.raises(ValueError, match="needs 100 items"):
        evaluate_look(plan, 1, baseline[:60], candidate[:60])


def test_items_with_several_samples_use_the_paired_t_on_item_means() -> None:
    plan = design(40, 1, margin=0.03, alpha=0.05)
    baseline = [ItemTotals(4, 3.0)] * 40
    candidate = [ItemTotals(4, 3.0 if index % 2 else 2.0) for index in range(40)]
    look = evaluate_look(plan, 0, baseline, candidate)
    assert look.method.startswith("paired t")
    assert look.verdict == FAIL


def test_an_unchanged_run_passes_at_the_last_look_when_it_agrees_everywhere() -> None:
    plan = design(300, 3, margin=0.03, alpha=0.05)
    same = [ItemTotals(1, float(index % 3 > 0)) for index in range(300)]
    suite = SequentialSuite(plan, looping_floor=0.02, truncation_floor=0.05)
    stops = [suite.add(item, item, looping=False, truncated=False) for item in same]
    stop = next(stop for stop in stops if stop is not None)
    assert stop.verdict == PASS and stop.by == BY_LOOK
    assert [look.verdict for look in suite.looks][-1] == PASS


def test_the_looping_monitor_stops_a_suite_before_any_look() -> None:
    plan = design(300, 3, margin=0.03, alpha=0.05)
    suite = SequentialSuite(plan, looping_floor=0.02, truncation_floor=0.05)
    right = ItemTotals(1, 1.0)
    stop = None
    for _ in range(10):
        stop = suite.add(right, right, looping=True, truncated=False)
        if stop:
            break
    assert stop is not None and stop.verdict == FAIL and stop.by == BY_LOOPING
    # The mixture of 5×, 12.5× and 25× the 2% floor: after two looping items (25 + 156 + 625) / 3
    # = 269 ≥ 200; the 5× ratio alone would need a fourth (log 5 per item against log 200).
    assert stop.items == 2 and suite.looks == []
    assert suite.to_dict()["stop"]["by"] == BY_LOOPING


def test_a_suite_that_reaches_the_maximum_is_inconclusive() -> None:
    plan = design(20, 2, margin=0.03, alpha=0.05)
    suite = SequentialSuite(plan, looping_floor=0.02, truncation_floor=0.05)
    right, wrong = ItemTotals(1, 1.0), ItemTotals(1, 0.0)
    stop = None
    for index in range(20):
        pair = (right, wrong) if index % 4 == 0 else (wrong, right) if index % 4 == 1 else (right, right)
        stop = suite.add(*pair, looping=False, truncated=False)
    assert stop is not None and stop.verdict == INCONCLUSIVE and stop.items == 20
    # A stopped suite stays stopped: later items change nothing.
    assert suite.add(right, wrong, looping=True, truncated=True) is stop and suite.items == 20


def test_monitors_refuse_what_they_cannot_monitor() -> None:
    with pytest.raises(ValueError, match="floor"):
        RateMonitor("looping", floor=1.5)
    # A floor so high that no alternative (5× and up) is a rate: the monitor stays silent.
    silent = RateMonitor("looping", floor=0.3)
    assert silent.ratios == () and not any(silent.observe(True) for _ in range(100))
    with pytest.raises(ValueError, match="lies in"):
        AccuracyMonitor(0.03).observe(1.5)


def _false_alarms(floor: float, rate: float, items: int = 60, runs: int = 2000) -> int:
    generator = random.Random(7)
    alarms = 0
    for _ in range(runs):
        monitor = RateMonitor("looping", floor)
        alarms += any(monitor.observe(generator.random() < rate) for _ in range(items))
    return alarms


def test_the_looping_monitor_tests_against_the_baselines_own_rate_when_it_is_above_the_floor() -> None:
    # A baseline that loops on 6 of its 60 items: an unchanged candidate loops as often.
    null = monitored_floor(0.02, 6, 60)
    assert null == pytest.approx(0.10)
    # Against the 2% floor alone the monitor would FAIL such a candidate in most runs of 60 items;
    # against the baseline's rate it keeps its level (0.005, 10 of 2,000).
    assert _false_alarms(0.02, 0.10) > 600
    assert _false_alarms(null, 0.10) <= 10
    # A baseline under the floor leaves the floor; one that loops half the time silences the monitor.
    assert monitored_floor(0.02, 0, 60) == 0.02 and monitored_floor(0.02, 0, 0) == 0.02
    assert RateMonitor("looping", monitored_floor(0.02, 60, 60)).ratios == ()


def test_the_accuracy_monitor_does_not_bet_on_a_gain() -> None:
    monitor = AccuracyMonitor(0.03)
    for _ in range(500):
        monitor.observe(1.0)
    assert monitor.log_wealth == 0.0 and monitor.stopped_at is None


def test_the_spread_comes_from_an_a_a_pair_when_there_is_one() -> None:
    baseline = {str(i): ItemTotals(1, float(i % 2)) for i in range(100)}
    partner = {str(i): ItemTotals(1, float(i % 2 if i >= 10 else 1 - i % 2)) for i in range(100)}
    spread = spread_from(baseline, partner, "tp8/run-2")
    assert "A/A pair with tp8/run-2" in spread.source and "10% with different scores" in spread.source
    assert spread.sd == pytest.approx(math.sqrt(10 / 99), rel=1e-6)


def test_the_spread_comes_from_several_samples_per_item_or_is_assumed() -> None:
    sampled = {str(i): ItemTotals(4, 2.0) for i in range(50)}
    spread = spread_from(sampled, None, None)
    # 2 · (4/3 · 0.25) / 4 per item.
    assert spread.sd == pytest.approx(math.sqrt(2 * 4 / 3 * 0.25 / 4))
    assert "within-item" in spread.source
    single = {str(i): ItemTotals(1, 1.0) for i in range(50)}
    assumed = spread_from(single, None, None)
    assert assumed.sd == pytest.approx(math.sqrt(ASSUMED_DISCORDANCE)) and assumed.source.startswith("ASSUMED")


def test_a_plan_matches_the_fixed_size_figures_and_caps_at_the_items_there_are() -> None:
    many = {str(i): ItemTotals(1, 1.0) for i in range(5000)}
    plan = plan_suite("coding", many, spread_from(many, None, None), margin=0.03, alpha=0.05)
    # GATE_NOTES: a fixed-size design needs about 1,033 items for 80% PASS at no change.
    assert 1020 <= plan.fixed_items_no_change <= 1040
    assert plan.design.max_items == plan.planned_items == 1109
    assert 0.8 <= plan.pass_no_change <= 0.83 and plan.fail_double_loss >= 0.8
    assert plan.expected_items_no_change < 0.85 * plan.fixed_items_no_change
    assert plan.min_detectable_drop == pytest.approx(0.06, abs=0.002)
    few = {str(i): ItemTotals(1, 1.0) for i in range(113)}
    small = plan_suite("coding", few, spread_from(few, None, None), margin=0.03, alpha=0.05, looks=5)
    assert small.design.max_items == 113 and small.min_detectable_drop > 0.1
    lines = plan_lines(small)
    assert "maximum 113 items (capped: 1109 planned for 80% power)" in lines[1]
    capped = plan_suite("coding", many, spread_from(many, None, None), margin=0.03, alpha=0.05, max_items=600)
    assert capped.design.max_items == 600


def test_a_suite_that_cannot_be_planned_runs_fixed_size() -> None:

    from k3conformance.gate.sequential.state import SequentialRun, committed_order
    from k3conformance.gate.settings import GateSettings
    from k3conformance.runs.schema import RunSummary
    from k3conformance.runs.stored import StoredRun

    scores = {
        str(i): {"samples": 1, "correct": float(i % 2), "looping": 0, "truncated": 0, "no_answer": 0} for i in range(50)
    }
    baseline = StoredRun(
        cast("RunSummary", {"suites": {"coding": {"scores": scores}, "math": {"scores": scores}}}), None
    )
    collected = {"coding": dict.fromkeys(scores, ""), "math": dict.fromkeys(scores, "")}
    settings = GateSettings(alpha=0.05, margin=3.0, margins=(("math", 0.0),), looks=5, max_items=None)
    run = SequentialRun.start(baseline, settings, "run-1", collected)
    # math has a margin of 0: no sequential plan, so it is not gated sequentially.
    assert list(run.suites) == ["coding"]
    # The committed order is a seeded permutation: the same for the same run, another for another run.
    assert run.suites["coding"].order == committed_order(collected["coding"], "run-1", "coding")[0]
    assert run.suites["coding"].order != committed_order(collected["coding"], "run-2", "coding")[0]
    assert sorted(run.suites["coding"].order) == sorted(scores)


def test_the_committed_order_holds_every_kind_in_proportion_at_every_prefix() -> None:
    from k3conformance.gate.sequential.state import committed_order

    # The agentic suite's mix: 35 bug fixes, 10 features, 10 refactors, 5 modules.
    counts = {"bugfix": 35, "feature": 10, "refactor": 10, "spec": 5}
    kinds = {f"{kind}-{index}": kind for kind, count in counts.items() for index in range(count)}
    orders = set()
    for run_id in ("run-1", "run-2", "run-3"):
        order, _ = committed_order(kinds, run_id, "agentic_coding")
        assert sorted(order) == sorted(kinds)
        orders.add(tuple(order))
        for prefix in range(1, len(order) + 1):
            seen = [kinds[item] for item in order[:prefix]]
            for kind, count in counts.items():
                assert abs(seen.count(kind) - prefix * count / len(kinds)) < 1, (run_id, prefix, kind)
        # The same run id gives the same order (a replay rebuilds it).
        assert committed_order(kinds, run_id, "agentic_coding")[0] == order
    # Within each kind the order is a seeded shuffle: another run, another order.
    assert len(orders) == 3


def test_the_look_chart_draws_each_look_against_its_bounds() -> None:
    plan = design(300, 3, margin=0.03, alpha=0.05)
    same = [ItemTotals(1, float(index % 3 > 0)) for index in range(300)]
    suite = SequentialSuite(plan, looping_floor=0.02, truncation_floor=0.05)
    for item in same:
        if suite.add(item, item, looping=False, truncated=False):
            break
    lines = look_chart("math", suite.to_dict())
    assert lines[0].startswith("math: PASS at look ") and "3 looks planned at 100, 200, 300 items" in lines[0]
    rows = lines[2:]
    assert len(rows) == len(suite.looks)
    for row, look in zip(rows, suite.looks, strict=True):
        chart = row[row.index("|") : row.rindex("|") + 1]
        # Left to right: the FAIL bound, zero, then the statistic and the PASS bound in the order of their values.
        assert chart.index("F") < chart.index("·") < chart.index("*")
        if look.verdict == PASS:
            assert "P" not in chart or chart.index("P") <= chart.index("*")
        else:
            assert chart.index("*") < chart.index("P")
        assert row.rstrip().endswith(look.verdict)
    # A suite stopped by a monitor says so, with the looks it took before.
    stopped = SequentialSuite(plan, looping_floor=0.02, truncation_floor=0.05)
    right = ItemTotals(1, 1.0)
    while not stopped.add(right, right, looping=True, truncated=False):
        pass
    assert look_chart("coding", stopped.to_dict()) == [
        "coding: FAIL by the looping monitor after 2 items, before look 1 "
        "(3 looks planned at 100, 200, 300 items; no look taken)"
    ]


def test_a_sequential_block_that_is_not_a_table_of_suites_is_replayed_to_nothing() -> None:
    from k3conformance.gate.sequential.replay import replay_sequential
    from k3conformance.gate.settings import GateSettings
    from k3conformance.runs.stored import StoredRun

    empty = StoredRun({"suites": {}}, None)  # type: ignore[typeddict-item]
    replayed = replay_sequential(["x"], empty, empty, GateSettings())  # type: ignore[arg-type]
    assert replayed.paths == {} and "not a table of suites" in replayed.notes[0]
