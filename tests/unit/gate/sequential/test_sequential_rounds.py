"""Rounds of samples per item in the sequential gate (k3conformance/stats/group_sequential.py rounds_design,
SequentialSuite.add_round): the covariance claim the bounds rest on, the design's shape, and the
calibration of the rule with rounds (tests/support/rounds_simulation.py; docs/sequential-gating.md's rounds table is these
figures). Error rates are asserted with a Monte-Carlo allowance of two standard errors above α."""

from __future__ import annotations

import argparse
import math

import numpy as np
import pytest
from rounds_simulation import ALPHA, ITEMS, ROUNDS, RoundsScenario, item_design, run_rounds, scenario_design

from k3conformance.gate.sequential.chart import look_chart
from k3conformance.gate.sequential.replay import _design_of
from k3conformance.gate.sequential.rule import SequentialSuite
from k3conformance.gate.sequential.state import SequentialRun
from k3conformance.gate.settings import GateSettings
from k3conformance.options import sample_rounds_list
from k3conformance.runs.stored import StoredRun
from k3conformance.scoring.item_score import ItemScore
from k3conformance.stats.group_sequential import ItemVariance, round_fractions, rounds_design
from k3conformance.stats.paired import FAIL, INCONCLUSIVE, PASS, ItemTotals

MARGIN = 0.10
COMPARISONS = 1000


def allowance(comparisons: int, rate: float = ALPHA) -> float:
    return rate + 2 * math.sqrt(rate * (1 - rate) / comparisons)


def test_nested_looks_have_the_covariance_of_independent_increments() -> None:
    """Cov(D(n_j, s_j), D(n_k, s_k)) = Var D(n_k, s_k) = (B + Nb + W/s_k)/n_k for n_j ≤ n_k, s_j ≤ s_k."""
    between, baseline_noise, within = 0.02, 0.03, 0.2
    rng = np.random.default_rng(15)
    replicates, items, samples = 40_000, 20, 8
    effect = rng.normal(0, math.sqrt(between), (replicates, items)) + rng.normal(
        0, math.sqrt(baseline_noise), (replicates, items)
    )
    noise = rng.normal(0, math.sqrt(within), (replicates, items, samples))

    def mean_difference(n: int, s: int) -> np.ndarray:
        means: np.ndarray = (effect[:, :n] + noise[:, :n, :s].mean(axis=2)).mean(axis=1)
        return means

    looks = [(5, 1), (10, 1), (20, 1), (20, 2), (20, 8)]
    values = {look: mean_difference(*look) for look in looks}
    variance = ItemVariance(between, baseline_noise, within)
    for index, earlier in enumerate(looks):
        for later in looks[index:]:
            covariance = float(np.cov(values[earlier], values[later])[0, 1])
            expected = variance.at(later[1]) / later[0]
            # 40,000 replicates: the sample covariance is within about 2% of its value.
            assert covariance == pytest.approx(expected, rel=0.04), (earlier, later)


def test_the_rounds_design_looks_at_items_then_at_every_item_per_round() -> None:
    variance = ItemVariance(0.01, 0.05, 0.2)
    base = item_design(MARGIN)
    chosen = rounds_design(base, ROUNDS, variance)
    assert chosen.sizes == (*base.sizes, ITEMS, ITEMS, ITEMS)
    assert chosen.samples == (1, 1, 1, 1, 1, 2, 4, 8)
    last = variance.at(8)
    expected = [size / ITEMS * last / variance.at(1) for size in base.sizes] + [
        last / variance.at(s) for s in (2, 4, 8)
    ]
    assert list(chosen.fractions) == pytest.approx(expected)
    assert chosen.fractions == tuple(round_fractions(base.sizes, ITEMS, ROUNDS, variance))
    # The last look is at information 1: its bound is near the fixed-size one; earlier ones are wider.
    assert chosen.pass_bounds[-1] < base.pass_bounds[-1] and chosen.pass_bounds[4] > base.pass_bounds[-1]
    assert chosen.has_rounds and not base.has_rounds
    # Stored and read back (compare's replay); an item-only design is stored as before rounds existed.
    assert _design_of({"design": chosen.to_dict()}) == chosen
    assert "samples" not in base.to_dict() and _design_of({"design": base.to_dict()}) == base


def test_a_round_look_waits_for_round_one_and_decides_on_every_item() -> None:
    chosen = scenario_design(RoundsScenario(MARGIN, 0.0))
    suite = SequentialSuite(chosen, looping_floor=0.02, truncation_floor=0.05)
    baseline = [ItemTotals(4, float(index % 5)) for index in range(ITEMS)]
    with pytest.raises(ValueError, match="no round look is due"):
        suite.add_round(baseline)
    for item in baseline:
        assert suite.add(item, ItemTotals(1, float(item.mean > 0.5)), looping=False, truncated=False) is None
    assert len(suite.looks) == 5 and suite.awaits_round
    # Round 2 differs item by item from the baseline; at round 3 the candidate equals it item by
    # item: no spread, a PASS.
    assert suite.add_round([ItemTotals(2, float(index % 3)) for index in range(ITEMS)]) is None
    assert suite.looks[-1].verdict == INCONCLUSIVE
    stop = suite.add_round(baseline)
    assert stop is not None and stop.verdict == PASS and stop.look == 7 and stop.items == ITEMS
    chart = look_chart("math", {**suite.to_dict(), "stop": vars(stop)})
    assert chart[0].startswith("math: PASS at look 7 (round 3: 4 samples per item on 41 items)")
    assert "(41, 1), (41, 2), (41, 4), (41, 8) (items, samples per item)" in chart[0]


def _rates(scenario: RoundsScenario, seed: int, rounds: tuple[int, ...] = ROUNDS) -> tuple[float, float, float]:
    verdicts, samples, stopped_at = run_rounds(scenario, COMPARISONS, seed=seed, rounds=rounds)
    fail, passed = verdicts[FAIL] / COMPARISONS, verdicts[PASS] / COMPARISONS
    print(
        f"{scenario} rounds {rounds}: FAIL {fail:.1%}, PASS {passed:.1%}, INCONCLUSIVE "
        f"{verdicts[INCONCLUSIVE] / COMPARISONS:.1%}, mean candidate samples {samples:.0f}, "
        f"stopped at looks {dict(sorted(stopped_at.items()))}"
    )
    return fail, passed, samples


def test_with_rounds_an_unchanged_deployment_rarely_fails() -> None:
    fail, _, _ = _rates(RoundsScenario(MARGIN, 0.0), seed=1)
    assert fail <= allowance(COMPARISONS)


def test_with_rounds_at_the_margin_neither_verdict_exceeds_alpha() -> None:
    fail, passed, _ = _rates(RoundsScenario(MARGIN, -MARGIN), seed=2)
    assert fail <= allowance(COMPARISONS) and passed <= allowance(COMPARISONS)


def test_with_few_items_rounds_decide_what_item_looks_alone_leave_inconclusive() -> None:
    _, items_only, _ = _rates(RoundsScenario(MARGIN, 0.0), seed=3, rounds=(1,))
    _, with_rounds, samples = _rates(RoundsScenario(MARGIN, 0.0), seed=3)
    assert items_only < 0.4 < 0.55 < with_rounds
    loss_items_only, _, _ = _rates(RoundsScenario(MARGIN, -2 * MARGIN), seed=4, rounds=(1,))
    loss_with_rounds, _, _ = _rates(RoundsScenario(MARGIN, -2 * MARGIN), seed=4)
    assert loss_items_only < 0.4 < 0.55 < loss_with_rounds
    # Rounds stop early too: fewer candidate samples than the 8 per item of the last round.
    assert samples < ITEMS * ROUNDS[-1]


def test_a_candidate_noisier_than_planned_keeps_its_error_rates_near_alpha() -> None:
    """The fractions are planned from the baseline's within-item variance; a candidate with twice
    that variance reaches its looks at other information than planned. The error rates move, but
    stay near α (the statistic is studentized at every look; only the spending is off-plan)."""
    fail, passed, _ = _rates(RoundsScenario(MARGIN, -MARGIN, planned_within=0.5), seed=5)
    assert fail <= allowance(COMPARISONS, 2 * ALPHA) and passed <= allowance(COMPARISONS, 2 * ALPHA)


def _rounds_run() -> tuple[SequentialRun, list[str]]:
    scores = {
        str(i): {"samples": 4, "correct": float(i % 5), "looping": 0, "truncated": 0, "no_answer": 0}
        for i in range(ITEMS)
    }
    baseline = StoredRun({"suites": {"math": {"scores": scores}}}, None)  # type: ignore[typeddict-item]
    run = SequentialRun.start(
        baseline, GateSettings(margin=10.0, samples=1), "run-1", {"math": dict.fromkeys(scores, "")}
    )
    return run, run.suites["math"].order


def test_a_run_sends_each_round_only_once_it_is_the_next_look_and_a_round_not_scored_blocks_it() -> None:
    run, order = _rounds_run()
    entry = run.suites["math"]
    assert entry.design.samples == (1, 1, 1, 1, 1, 2, 4, 8) and run.rounds_of("math") == (1, 2, 4, 8)
    for first_sample in (0, 1, 2, 4):
        for item in order:
            run.expect_tests("math", item, first_sample)
    # Round 1 runs ahead to the first look's items; no later round is sent yet.
    assert run.may_send("math", order[7]) and not run.may_send("math", order[8])
    assert not run.may_send("math", order[0], first_sample=1)
    totals = {item: ItemScore() for item in order}
    for item in order:
        totals[item].add(float(int(item) % 2), answered=True, truncated=False, output_tokens=1)
        assert run.test_done("math", item, totals[item]) is None
    assert len(entry.rule.looks) == 5 and entry.rule.awaits_round
    assert run.may_send("math", order[-1], first_sample=1) and not run.may_send("math", order[0], first_sample=2)
    # Round 2 of one item reports with no new sample (its test could not be scored): no round look.
    stuck = order[3]
    for item in order:
        if item != stuck:
            totals[item].add(float(int(item) % 2), answered=True, truncated=False, output_tokens=1)
        assert run.test_done("math", item, totals[item], first_sample=1) is None
    assert len(entry.rule.looks) == 5 and entry.blocked_by == stuck
    assert run.used("math", order[0], 1) and not run.used("math", stuck, 1)
    assert entry.round_totals()[order[0]] == [
        [1, float(int(order[0]) % 2), False, False],
        [2, 2 * float(int(order[0]) % 2), False, False],
    ]


def test_sample_rounds_none_or_empty_turns_rounds_off() -> None:
    assert sample_rounds_list("none") == sample_rounds_list("") == sample_rounds_list(" None ") == ()
    assert sample_rounds_list("2, 4,8") == (2, 4, 8)
    with pytest.raises(argparse.ArgumentTypeError):
        sample_rounds_list("2,zero")
