"""Looping and truncation rates of runs that took different numbers of samples of an item.

The property: a candidate equal to the baseline does not look worse on a rate because it took
more samples of each item (a sequential candidate's last rounds against a stored baseline)."""

from __future__ import annotations

import math
import random

from scipy import stats

from k3conformance.stats.paired import any_in_samples, compare_rates, compare_rates_by_item

ALPHA = 0.05


def test_any_in_samples_is_exact_at_its_edges() -> None:
    assert any_in_samples(0, 8, 4) == 0.0
    assert any_in_samples(8, 8, 4) == 1.0
    assert any_in_samples(1, 4, 1) == 0.25
    assert any_in_samples(1, 2, 2) == 1.0
    assert any_in_samples(3, 5, 0) == 0.0


def test_any_in_samples_is_unbiased_for_the_chance_in_fewer_fresh_samples() -> None:
    for chance in (0.02, 0.3, 0.68, 0.95):
        for samples, taken in ((8, 4), (4, 1), (8, 2), (4, 4)):
            expected = sum(
                float(stats.binom.pmf(hits, samples, chance)) * any_in_samples(hits, samples, taken)
                for hits in range(samples + 1)
            )
            assert math.isclose(expected, 1 - (1 - chance) ** taken, abs_tol=1e-12)


def test_equal_samples_keep_fishers_exact_test_on_items() -> None:
    counts = [((1, 4), (2, 4))] * 5 + [((0, 4), (1, 4))] * 3 + [((0, 4), (0, 4))] * 12
    by_item = compare_rates_by_item("looping", counts, floor=0.02, alpha=ALPHA)
    plain = compare_rates("looping", (5, 20), (8, 20), floor=0.02, alpha=ALPHA)
    assert by_item == plain and by_item.test == "fisher"


def _draw(rng: random.Random, chances: list[float], samples: int) -> list[tuple[int, int]]:
    return [(sum(rng.random() < chance for _ in range(samples)), samples) for chance in chances]


def test_an_unchanged_candidate_at_more_samples_fails_at_most_alpha() -> None:
    """Items whose truncation chances spread as llama.cpp SmolLM2's did at temperature 1 (68% of
    items truncated somewhere in 4 samples), the baseline at 4 samples, the candidate at 8."""
    rng = random.Random(20261204)
    chances = [rng.betavariate(0.6, 0.9) for _ in range(342)]
    trials, fails, fails_in_any_sample = 300, 0, 0
    for _ in range(trials):
        pairs = list(zip(_draw(rng, chances, 4), _draw(rng, chances, 8), strict=True))
        fails += compare_rates_by_item("truncation", pairs, floor=0.05, alpha=ALPHA).verdict == "FAIL"
        # What the gate did before: items with it in any sample, whatever the samples.
        before = sum(base > 0 for (base, _), _ in pairs), len(pairs)
        after = sum(cand > 0 for _, (cand, _) in pairs), len(pairs)
        fails_in_any_sample += compare_rates("truncation", before, after, floor=0.05, alpha=ALPHA).verdict == "FAIL"
    # α plus three binomial standard errors of 300 trials.
    assert fails / trials <= ALPHA + 3 * math.sqrt(ALPHA * (1 - ALPHA) / trials)
    assert fails_in_any_sample / trials > 0.9


def test_a_real_rise_at_more_samples_still_fails() -> None:
    rng = random.Random(7)
    chances = [rng.betavariate(0.6, 0.9) for _ in range(342)]
    worse = [min(1.0, chance + 0.15) for chance in chances]
    pairs = list(zip(_draw(rng, chances, 4), _draw(rng, worse, 8), strict=True))
    rate = compare_rates_by_item("truncation", pairs, floor=0.05, alpha=ALPHA)
    assert rate.verdict == "FAIL" and rate.test == "paired t"
    assert rate.candidate_rate > rate.baseline_rate


def test_no_events_on_either_side_pass() -> None:
    pairs = [((0, 4), (0, 8))] * 50
    rate = compare_rates_by_item("looping", pairs, floor=0.02, alpha=ALPHA)
    assert rate.verdict == "PASS" and rate.p_value == 1.0 and rate.candidate_events == 0.0
