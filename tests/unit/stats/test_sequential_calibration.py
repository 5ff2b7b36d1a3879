"""Calibration of the sequential gate (k3conformance/gate/sequential/rule.py): seeded synthetic
paired comparisons of binary items, run item by item through the same SequentialSuite the
runner uses, at 68.1% baseline accuracy, margin 3 points, α 0.05 (the FAIL side's looks
spend 0.045 and the always-valid accuracy monitor 0.005).

The design is the one `k3conformance plan` makes for an assumed 15% discordance without a
cap (5 looks, maximum 1,109 items). Each scenario prints its verdict shares and expected
items; docs/sequential-gating.md's table is these figures. Error rates are asserted with a
Monte-Carlo allowance of two standard errors above α.
"""

from __future__ import annotations

import math
import random
import statistics

import pytest
from sequential_simulation import DESIGN, Scenario, draw_pair, monitor_stops, run

from k3conformance.stats.monitors import AccuracyMonitor
from k3conformance.stats.paired import FAIL, PASS

ALPHA = 0.05
MARGIN = 0.03


def allowance(comparisons: int, rate: float = ALPHA) -> float:
    return rate + 2 * math.sqrt(rate * (1 - rate) / comparisons)


def test_the_design_is_the_planned_one() -> None:
    assert DESIGN.max_items == 1109
    assert DESIGN.sizes == (222, 444, 665, 887, 1109)


def test_a_a_passes_most_of_the_time_and_fails_rarely() -> None:
    comparisons = 400
    verdicts, mean_items, _ = run(Scenario(0.075, 0.075), comparisons)
    print(f"A/A, 15% discordant: {dict(verdicts)}, mean items {mean_items:.0f}")
    assert verdicts[FAIL] <= 0.01 * comparisons
    assert verdicts[PASS] >= 0.75 * comparisons
    # The fixed-size design needs 1,031 items for the same 80% PASS.
    assert mean_items < 900


# At a true loss equal to the margin both verdicts are wrong. Swept over discordance: the
# score statistic estimates its variance under the null, so no discordance is assumed.
@pytest.mark.parametrize("discordance", [0.03, 0.06, 0.10, 0.15, 0.25])
def test_at_the_margin_neither_verdict_exceeds_alpha(discordance: float) -> None:
    comparisons = 500
    scenario = Scenario((discordance + MARGIN) / 2, (discordance - MARGIN) / 2)
    verdicts, mean_items, stopped_by = run(scenario, comparisons, seed=int(discordance * 100))
    print(
        f"at the margin, {discordance:.0%} discordant: {dict(verdicts)}, mean items {mean_items:.0f}, {dict(stopped_by)}"
    )
    assert verdicts[FAIL] <= allowance(comparisons) * comparisons
    assert verdicts[PASS] <= allowance(comparisons) * comparisons


def test_a_seven_point_loss_fails_almost_always_and_early() -> None:
    comparisons = 400
    verdicts, mean_items, stopped_by = run(Scenario(0.11, 0.04), comparisons)
    print(f"−7 points, 15% discordant: {dict(verdicts)}, mean items {mean_items:.0f}, {dict(stopped_by)}")
    assert verdicts[FAIL] >= 0.93 * comparisons
    assert verdicts[PASS] == 0
    # A fixed-size design needs 586 items for 80% power at this loss, and about 1,165 for 96%.
    assert mean_items < 750


def test_a_deepep_sized_loss_inside_the_margin_rarely_fails() -> None:
    comparisons = 400
    # 68.1% → 65.5%: 2.6 points, inside the 3-point margin.
    verdicts, mean_items, _ = run(Scenario(0.088, 0.062), comparisons)
    print(f"DeepEP-sized −2.6 points: {dict(verdicts)}, mean items {mean_items:.0f}")
    assert verdicts[FAIL] <= allowance(comparisons) * comparisons


def test_the_megamoe_case_fails_within_a_few_dozen_items() -> None:
    comparisons = 400
    # Half the outputs loop (57 of 113 published), the rest right 86% of the time: 42.5% in all.
    verdicts, mean_items, stopped_by = run(Scenario(0.0, 0.0, looping=0.504), comparisons)
    print(f"MegaMoE: {dict(verdicts)}, mean items {mean_items:.1f}, {dict(stopped_by)}")
    assert verdicts[FAIL] == comparisons
    assert mean_items < 20


def test_the_looping_monitor_stops_megamoe_in_about_five_items_and_rarely_at_the_floor() -> None:
    median = statistics.median(stop for stop in monitor_stops(0.504, 2000) if stop is not None)
    print(f"looping monitor on MegaMoE (50% looping): median {median} items")
    assert median <= 6
    # At the floor, over 1,000 items each: false alarms at most α = 0.005 (Ville).
    runs = 1000
    alarms = sum(stop is not None for stop in monitor_stops(0.02, runs, seed=10, most=1000))
    print(f"looping monitor at the 2% floor: {alarms}/{runs} false alarms over 1,000 items")
    assert alarms <= allowance(runs, 0.005) * runs


@pytest.mark.parametrize(("rate", "most_items"), [(0.504, 0.8), (0.35, 0.85), (0.10, 1.35)])
def test_the_mixture_stops_large_rates_sooner_at_a_small_cost_near_five_times_the_floor(
    rate: float, most_items: float
) -> None:
    """Against the single 5× alternative: sooner where the published case lies (50%) and at the
    simulator's 35%, a little later at 10% (5× the floor), where the 5× ratio has a third of the weight."""
    mixture = statistics.median(stop or 10_000 for stop in monitor_stops(rate, 1000, seed=1))
    single = statistics.median(stop or 10_000 for stop in monitor_stops(rate, 1000, ratios=(5.0,), seed=1))
    print(f"looping rate {rate:.0%}: median {mixture} items (mixture) against {single} (5× alone)")
    assert mixture <= most_items * single
    if rate < 0.2:
        assert mixture > single


def test_the_accuracy_monitor_stops_megamoe_and_rarely_fails_at_the_margin() -> None:
    stops = []
    for index in range(500):
        rng = random.Random(index)
        monitor = AccuracyMonitor(MARGIN)
        while True:
            baseline, candidate, _ = draw_pair(Scenario(0.0, 0.0, looping=0.504), rng)
            if monitor.observe(candidate.mean - baseline.mean):
                break
        stops.append(monitor.items)
    median = statistics.median(stops)
    print(f"accuracy monitor on MegaMoE: median {median} items")
    assert median <= 80
    runs = 600
    alarms = 0
    for index in range(runs):
        rng = random.Random(50_000 + index)
        monitor = AccuracyMonitor(MARGIN)
        scenario = Scenario(0.09, 0.06)
        for _ in range(1109):
            baseline, candidate, _ = draw_pair(scenario, rng)
            if monitor.observe(candidate.mean - baseline.mean):
                alarms += 1
                break
    print(f"accuracy monitor at the margin: {alarms}/{runs} false FAILs over 1,109 items")
    assert alarms <= allowance(runs, 0.005) * runs


def test_a_wald_sprt_that_assumes_the_discordance_is_not_valid() -> None:
    """Why the gate does not ship one: a Wald SPRT on the discordant pairs, designed for 15%
    discordance (baseline-only share 0.6 at the margin against 0.7 at −6 points), fails a
    deployment exactly at the margin most of the time when only 6% of items disagree."""
    assumed = 0.15
    null_share, alternative_share = (1 + MARGIN / assumed) / 2, (1 + 2 * MARGIN / assumed) / 2
    up = math.log(alternative_share / null_share)
    down = math.log((1 - alternative_share) / (1 - null_share))
    threshold = math.log((1 - 0.2) / ALPHA)
    runs = 400
    false_fails = 0
    for index in range(runs):
        rng = random.Random(index)
        log_ratio = 0.0
        for _ in range(1109):
            baseline, candidate, _ = draw_pair(Scenario(0.045, 0.015), rng)
            if baseline.correct != candidate.correct:
                log_ratio += up if baseline.correct > candidate.correct else down
            if log_ratio >= threshold:
                false_fails += 1
                break
            if log_ratio <= math.log(0.2 / (1 - ALPHA)):
                break
    print(f"Wald SPRT assuming 15% discordance, at the margin with 6%: {false_fails}/{runs} false FAILs")
    # The shipped rule at the same point stays within α: test_at_the_margin_neither_verdict_exceeds_alpha[0.06].
    assert false_fails > 0.5 * runs


def test_an_order_stratified_by_kind_stops_the_looping_suite_within_the_first_look_more_often() -> None:
    """The simulator's agentic suite on ep32-megamoe: loops only on the long-output kinds (21 of
    25 features, refactors and modules; none of 35 bug fixes). The committed order stratified by
    kind puts about 5 long-output tasks in every 12, so the looping monitor stops within the
    first look (item 12) more often than after a plain shuffle, which can leave them late."""
    from k3conformance.gate.sequential.state import committed_order
    from k3conformance.stats.monitors import RateMonitor

    mix = {"bugfix": (35, 0), "feature": (10, 9), "refactor": (10, 9), "spec": (5, 3)}
    kinds = {f"{kind}-{index}": kind for kind, (count, _) in mix.items() for index in range(count)}
    looping = {f"{kind}-{index}" for kind, (_, loops) in mix.items() for index in range(loops)}

    def stop(order: list[str]) -> int:
        monitor = RateMonitor("looping", floor=0.02)
        return next((monitor.items for item in order if monitor.observe(item in looping)), len(order) + 1)

    runs, first_look = 1000, 12
    stratified = [stop(committed_order(kinds, f"run-{index}", "agentic_coding")[0]) for index in range(runs)]
    shuffled = []
    for index in range(runs):
        order = sorted(kinds)
        random.Random(index).shuffle(order)
        shuffled.append(stop(order))
    within = sum(items <= first_look for items in stratified) / runs
    within_shuffled = sum(items <= first_look for items in shuffled) / runs
    print(f"stopped within the first look: {within:.1%} stratified, {within_shuffled:.1%} shuffled")
    assert within >= 0.85
    assert within >= within_shuffled + 0.07
    assert max(stratified) < max(shuffled)
