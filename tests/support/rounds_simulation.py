"""Seeded synthetic comparisons of a suite with few items sampled in rounds, run through the same
SequentialSuite the gate uses (round 1's items one by one, then one look per round): shared by
tests/unit/gate/sequential/test_sequential_rounds.py (the asserted error rates) and docs/sequential-gating.md's rounds table.

Each item i has a baseline probability p_i (uniform on [0.3, 0.8]) and a candidate probability
q_i = p_i + change + e_i, with e_i uniform of standard deviation `between` (items one layout
gets right more often than the other, no effect on average). The baseline has 4 samples per
item; the candidate 1, then 2, 4 and 8 on the same items (nested: a round adds samples). The
design is planned from the true variance parts, as the gate plans it from the baseline's.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from k3conformance.gate.sequential.rule import SequentialSuite
from k3conformance.stats.group_sequential import ItemVariance, SequentialDesign, design, rounds_design
from k3conformance.stats.monitors import MONITOR_ALPHA
from k3conformance.stats.paired import ItemTotals

ALPHA = 0.05
ITEMS = 41
LOOKS = 5
ROUNDS = (1, 2, 4, 8)
BASELINE_SAMPLES = 4
LOW, HIGH = 0.3, 0.8
# Per-sample variance p(1 − p) averaged over p uniform on [LOW, HIGH].
WITHIN = (HIGH**2 - LOW**2) / 2 / (HIGH - LOW) - (HIGH**3 - LOW**3) / 3 / (HIGH - LOW)


@dataclass(frozen=True)
class RoundsScenario:
    margin: float
    change: float
    between: float = 0.1
    # The plan's within-item variance as a share of the truth (0.5: the candidate's is twice the plan's).
    planned_within: float = 1.0


def planned_variance(scenario: RoundsScenario) -> ItemVariance:
    within = WITHIN * scenario.planned_within
    return ItemVariance(scenario.between**2, WITHIN / BASELINE_SAMPLES, within)


def item_design(margin: float) -> SequentialDesign:
    return design(ITEMS, LOOKS, margin=margin, alpha=ALPHA, fail_alpha=ALPHA - MONITOR_ALPHA)


def scenario_design(scenario: RoundsScenario, rounds: tuple[int, ...] = ROUNDS) -> SequentialDesign:
    base = item_design(scenario.margin)
    return rounds_design(base, rounds, planned_variance(scenario)) if len(rounds) > 1 else base


def _draw(scenario: RoundsScenario, rng: np.random.Generator) -> tuple[list[ItemTotals], np.ndarray]:
    """(baseline totals per item, candidate samples per item: ITEMS × max rounds, 0/1)."""
    p = rng.uniform(LOW, HIGH, ITEMS)
    half_width = math.sqrt(3) * scenario.between
    q = np.clip(p + scenario.change + rng.uniform(-half_width, half_width, ITEMS), 0.0, 1.0)
    baseline = rng.binomial(BASELINE_SAMPLES, p)
    candidate = (rng.random((ITEMS, ROUNDS[-1])) < q[:, None]).astype(float)
    return [ItemTotals(BASELINE_SAMPLES, float(k)) for k in baseline], candidate


def run_rounds(
    scenario: RoundsScenario, comparisons: int, seed: int = 0, rounds: tuple[int, ...] = ROUNDS
) -> tuple[Counter[str], float, Counter[int]]:
    """(verdicts, mean candidate samples used, the look each comparison stopped at) over seeded comparisons."""
    chosen = scenario_design(scenario, rounds)
    verdicts: Counter[str] = Counter()
    stopped_at: Counter[int] = Counter()
    samples_used = 0.0
    for index in range(comparisons):
        rng = np.random.default_rng([seed, index])
        baseline, candidate = _draw(scenario, rng)
        suite = SequentialSuite(chosen, looping_floor=0.02, truncation_floor=0.05)
        stop = None
        for item in range(ITEMS):
            first = ItemTotals(rounds[0], float(candidate[item, : rounds[0]].sum()))
            stop = suite.add(baseline[item], first, looping=False, truncated=False)
            if stop is not None:
                break
        used = suite.items * rounds[0]
        for count in rounds[1:]:
            if stop is not None:
                break
            stop = suite.add_round([ItemTotals(count, float(row[:count].sum())) for row in candidate])
            used = ITEMS * count
        assert stop is not None
        verdicts[stop.verdict] += 1
        stopped_at[stop.look] += 1
        samples_used += used
    return verdicts, samples_used / comparisons, stopped_at
