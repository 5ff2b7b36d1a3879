"""The paired tests at the degenerate edges (issue 21, reproduction 2): every difference equal, or
nearly, on few items. The t statistic was ±12 there ("never" on its scale), so a candidate whose
items all matched a baseline right on every sample passed at look 1 after 8 items, and at a true
loss of the margin 4 samples per item against such a baseline passed 41% of the time over 41
items (fixed size 11%)."""

from __future__ import annotations

import random

import pytest

from k3conformance.gate.sequential.rule import SequentialSuite
from k3conformance.stats.group_sequential import SequentialDesign, design, paired_t_statistic
from k3conformance.stats.paired import PASS, ItemTotals, compare_scores, too_few_disagreeing

MARGIN, ALPHA = 0.03, 0.05


def test_equal_differences_on_few_items_are_no_evidence_of_a_small_loss() -> None:
    statistic, _ = paired_t_statistic([0.0] * 8, MARGIN)
    assert 0 < statistic < 1
    # Nine of ten disagreeing items is still few; the plain spread returns from ten on.
    assert too_few_disagreeing([0.0] * 30 + [-0.25] * 9) and not too_few_disagreeing([0.0] * 30 + [-0.25] * 10)


def test_eight_equal_items_sampled_four_times_do_not_pass_at_look_1() -> None:
    right = ItemTotals(4, 4.0)
    suite = SequentialSuite(design(41, 5, margin=MARGIN, alpha=ALPHA), looping_floor=0.02, truncation_floor=0.05)
    for _ in range(8):
        stop = suite.add(right, right, looping=False, truncated=False)
    assert stop is None and suite.looks[0].verdict != PASS
    same = {str(i): right for i in range(8)}
    comparison = compare_scores(same, same, margin=MARGIN, alpha=ALPHA)
    assert comparison is not None and comparison.verdict != PASS


def _wrong_pass(chosen: SequentialDesign | None, rng: random.Random, trials: int, items: int) -> float:
    """Share of PASS at a true loss equal to the margin: the baseline right on all 4 samples of every
    item, the candidate right on each sample with probability 1 − margin."""
    passed = 0
    for _ in range(trials):
        base = [ItemTotals(4, 4.0)] * items
        cand = [ItemTotals(4, float(sum(rng.random() < 1 - MARGIN for _ in range(4)))) for _ in range(items)]
        if chosen is None:
            named = {str(i): b for i, b in enumerate(base)}, {str(i): c for i, c in enumerate(cand)}
            result = compare_scores(*named, margin=MARGIN, alpha=ALPHA)
            passed += result is not None and result.verdict == PASS
            continue
        suite = SequentialSuite(chosen, looping_floor=0.02, truncation_floor=0.05)
        for b, c in zip(base, cand, strict=True):
            stop = suite.add(b, c, looping=False, truncated=False)
            if stop is not None:
                passed += stop.verdict == PASS
                break
    return passed / trials


@pytest.mark.parametrize("sequential", [True, False], ids=["sequential", "fixed-size"])
def test_wrong_pass_at_a_loss_of_the_margin_stays_under_alpha_against_a_perfect_baseline(sequential: bool) -> None:
    chosen = design(41, 5, margin=MARGIN, alpha=ALPHA) if sequential else None
    assert _wrong_pass(chosen, random.Random(21), 400, 41) <= ALPHA


@pytest.mark.parametrize("step", [1 / 8, -1 / 8])
def test_every_item_moved_by_the_same_amount_is_judged_not_crashed(step: float) -> None:
    """Twenty items, each one sample of eight higher (or lower) than in the baseline: no spread
    at all among many disagreeing items. The paired t divided by that zero spread, in the
    fixed-size comparison and at a sequential look alike; the pseudo-observations' error is the
    floor there too."""
    baseline = {f"item-{i}": ItemTotals(8, 4.0) for i in range(20)}
    candidate = {item: ItemTotals(8, 4.0 + 8 * step) for item in baseline}
    comparison = compare_scores(baseline, candidate, margin=0.03, alpha=0.05)
    assert comparison is not None and comparison.lower < step < comparison.upper
    assert (comparison.verdict == PASS) == (step > 0)
    statistic, _ = paired_t_statistic([step] * 20, 0.03)
    assert (statistic > 0) == (step > 0)
