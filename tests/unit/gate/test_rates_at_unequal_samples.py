"""Looping and truncation rates of runs that took more than one sample of an item.

The property: a candidate equal to the baseline does not look worse (or better) on a rate
because of how many samples of each item either side took (a sequential candidate's rounds
against a stored baseline), and a real rise still FAILs."""

from __future__ import annotations

import math
import random

from k3conformance.stats.paired import compare_rates, compare_rates_by_item

ALPHA = 0.05
# α plus three binomial standard errors of this many trials.
TRIALS = 300
ALLOWED = ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / TRIALS)


def _draw(rng: random.Random, chances: list[float], samples: int) -> list[tuple[int, int]]:
    return [(sum(rng.random() < chance for _ in range(samples)), samples) for chance in chances]


def test_one_sample_a_side_keeps_fishers_exact_test_on_items() -> None:
    counts = [((1, 1), (1, 1))] * 5 + [((0, 1), (1, 1))] * 3 + [((0, 1), (0, 1))] * 12
    by_item = compare_rates_by_item("looping", counts, floor=0.02, alpha=ALPHA)
    plain = compare_rates("looping", (5, 20), (8, 20), floor=0.02, alpha=ALPHA)
    assert by_item == plain and by_item.test == "fisher"


def test_more_samples_give_the_share_of_outputs() -> None:
    counts = [((1, 4), (2, 8)), ((0, 4), (0, 8)), ((4, 4), (8, 8)), ((2, 4), (1, 8))]
    rate = compare_rates_by_item("truncation", counts, floor=0.05, alpha=ALPHA)
    assert rate.test == "paired t"
    assert math.isclose(rate.baseline_rate, (0.25 + 0 + 1 + 0.5) / 4)
    assert math.isclose(rate.candidate_rate, (0.25 + 0 + 1 + 0.125) / 4)


def test_an_unchanged_candidate_fails_at_most_alpha_whatever_the_samples() -> None:
    """Items whose truncation chances spread as llama.cpp SmolLM2's did at temperature 1 (a third
    of its outputs cut at the limit, 68% of items cut somewhere in 4 samples)."""
    rng = random.Random(20261204)
    chances = [rng.betavariate(0.6, 0.9) for _ in range(342)]
    for base_samples, cand_samples in ((4, 8), (4, 4), (4, 1)):
        fails = fails_in_any_sample = 0
        for _ in range(TRIALS):
            pairs = list(zip(_draw(rng, chances, base_samples), _draw(rng, chances, cand_samples), strict=True))
            fails += compare_rates_by_item("truncation", pairs, floor=0.05, alpha=ALPHA).verdict == "FAIL"
            # What the gate did before: items with it in any sample, whatever the samples.
            before = sum(base > 0 for (base, _), _ in pairs), len(pairs)
            after = sum(cand > 0 for _, (cand, _) in pairs), len(pairs)
            verdict = compare_rates("truncation", before, after, floor=0.05, alpha=ALPHA).verdict
            fails_in_any_sample += verdict == "FAIL"
        assert fails / TRIALS <= ALLOWED, (base_samples, cand_samples)
        if cand_samples > base_samples:
            assert fails_in_any_sample / TRIALS > 0.9


def test_rare_loops_fail_at_most_alpha_above_the_floor() -> None:
    rng = random.Random(11)
    chances = [rng.betavariate(0.1, 5) for _ in range(72)]
    fails = 0
    for _ in range(TRIALS):
        pairs = list(zip(_draw(rng, chances, 4), _draw(rng, chances, 8), strict=True))
        fails += compare_rates_by_item("looping", pairs, floor=0.02, alpha=ALPHA).verdict == "FAIL"
    assert fails / TRIALS <= ALLOWED


def test_a_real_rise_fails_at_more_samples_and_is_not_hidden_at_fewer() -> None:
    rng = random.Random(7)
    chances = [rng.betavariate(0.6, 0.9) for _ in range(342)]
    worse = [min(1.0, chance + 0.15) for chance in chances]
    for cand_samples in (8, 1):
        pairs = list(zip(_draw(rng, chances, 4), _draw(rng, worse, cand_samples), strict=True))
        rate = compare_rates_by_item("truncation", pairs, floor=0.05, alpha=ALPHA)
        assert rate.verdict == "FAIL" and rate.candidate_rate > rate.baseline_rate, cand_samples


def test_no_events_on_either_side_pass() -> None:
    pairs = [((0, 4), (0, 8))] * 50
    rate = compare_rates_by_item("looping", pairs, floor=0.02, alpha=ALPHA)
    assert rate.verdict == "PASS" and rate.p_value == 1.0 and rate.candidate_events == 0.0
