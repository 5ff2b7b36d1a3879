"""Seeded paired comparisons of items that have a difficulty of their own, run item by item through
the same plan and SequentialSuite the gate uses: what a PASS costs when items are not exchangeable.

Each comparison draws a pool of items, each with a latent uniform `u` and a solve chance that is
the `u`-quantile of Beta(μ·s, (1 − μ)·s) (reference/difficulty.py: the simulator's model, `s` from
the within-item share measured on a real engine), samples `k` answers per item on each side, and
feeds the items in a random order to the rule. A candidate that loses `loss` keeps each item's `u`
and moves the mean to μ − loss, so the loss falls on the items whose chance the shift moves most
(those near the middle), as a real degradation of the arithmetic does; the exchangeable regime
(every item at the mean) is the worst case, printed beside it. Shared by
tests/unit/stats/test_difficulty_calibration.py (asserted rates, few comparisons) and
benchmarks/bench_pass_power.py (the docs' tables)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
from scipy import stats

from k3conformance.gate.sequential.plan import plan_suite, spread_from
from k3conformance.gate.sequential.rule import SequentialSuite
from k3conformance.reference.difficulty import concentration
from k3conformance.stats.group_sequential import SequentialDesign
from k3conformance.stats.paired import ItemTotals


@dataclass(frozen=True)
class Pool:
    """What a suite's pool looks like to the gate: items, samples per item, mean accuracy, margin."""

    name: str
    items: int
    samples: int
    accuracy: float
    margin: float = 0.03
    alpha: float = 0.05
    # The share of μ(1 − μ) that stays within items: 1 is exchangeable.
    within_share: float = 1.0
    pass_power: float = 0.8


def chances(pool: Pool, u: np.ndarray, accuracy: float) -> np.ndarray:
    s = concentration(pool.within_share)
    if not np.isfinite(s):
        return np.full(u.shape, accuracy)
    return np.asarray(stats.beta.ppf(u, accuracy * s, (1 - accuracy) * s))


def totals(rng: np.random.Generator, p: np.ndarray, samples: int) -> list[ItemTotals]:
    return [ItemTotals(samples, float(right)) for right in rng.binomial(samples, p)]


def planned_design(pool: Pool, seed: int = 0) -> SequentialDesign:
    """The design the plan makes from one baseline of this pool (its own within-item spread)."""
    rng = np.random.default_rng(seed)
    baseline = totals(rng, chances(pool, rng.random(pool.items), pool.accuracy), pool.samples)
    by_id = {str(index): entry for index, entry in enumerate(baseline)}
    return plan_suite(
        pool.name,
        by_id,
        spread_from(by_id, None, None),
        margin=pool.margin,
        alpha=pool.alpha,
        pass_power=pool.pass_power,
    ).design


def run(pool: Pool, loss: float, comparisons: int, seed: int = 0) -> tuple[Counter[str], float]:
    """(verdicts, mean items used) over seeded comparisons at a true loss (a positive share)."""
    design = planned_design(pool, seed)
    verdicts: Counter[str] = Counter()
    used = []
    for index in range(comparisons):
        rng = np.random.default_rng([seed, index])
        u = rng.random(pool.items)
        baseline = totals(rng, chances(pool, u, pool.accuracy), pool.samples)
        candidate = totals(rng, chances(pool, u, max(pool.accuracy - loss, 1e-6)), pool.samples)
        suite = SequentialSuite(design, looping_floor=0.02, truncation_floor=0.05)
        stop = None
        for position in rng.permutation(pool.items)[: design.max_items]:
            stop = suite.add(baseline[position], candidate[position], looping=False, truncated=False)
            if stop is not None:
                break
        assert stop is not None, "the design decides or ends at its maximum"
        verdicts[stop.verdict] += 1
        used.append(stop.items)
    return verdicts, sum(used) / len(used)
