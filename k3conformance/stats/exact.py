"""Small exact tests for the statistical checks: no lucky single response decides them."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from math import comb


def permutation_p_greater(larger: Sequence[float], smaller: Sequence[float]) -> float:
    """One-sided exact permutation test that `larger` has the greater mean: the share of
    relabellings of the pooled values whose difference in means is at least the one
    observed. Exact for the small samples the checks use (8 + 8 values: 12,870 splits)."""
    pooled = [*larger, *smaller]
    size = len(larger)
    total = sum(pooled)
    observed = sum(larger) / size - sum(smaller) / len(smaller)
    at_least = 0
    count = 0
    for chosen in combinations(range(len(pooled)), size):
        picked = sum(pooled[index] for index in chosen)
        difference = picked / size - (total - picked) / len(smaller)
        at_least += difference >= observed - 1e-12
        count += 1
    return at_least / count


def binomial_p_at_least(successes: int, trials: int, rate: float) -> float:
    """P(X >= successes) for X ~ Binomial(trials, rate)."""
    return sum(comb(trials, k) * rate**k * (1 - rate) ** (trials - k) for k in range(successes, trials + 1))
