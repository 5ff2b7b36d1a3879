"""Seeded synthetic paired comparisons of binary items, run item by item through the same
SequentialSuite the gate uses: shared by tests/unit/stats/test_sequential_calibration.py (the asserted
error rates) and benchmarks/bench_sequential_gate.py (docs/sequential-gating.md's table, more comparisons)."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

import numpy as np
from scipy import signal, stats

from k3conformance.gate.sequential.plan import plan_suite, spread_from
from k3conformance.gate.sequential.rule import SequentialSuite
from k3conformance.stats.group_sequential import SequentialDesign
from k3conformance.stats.monitors import RATE_RATIOS, RateMonitor
from k3conformance.stats.paired import ItemTotals, tango_statistic

MARGIN = 0.03
ALPHA = 0.05
BASELINE_ACCURACY = 0.681
RIGHT = ItemTotals(1, 1.0)
WRONG = ItemTotals(1, 0.0)


@dataclass(frozen=True)
class Scenario:
    # Probabilities that an item is right only on the baseline / only on the candidate.
    baseline_only: float
    candidate_only: float
    # Probability that the candidate loops on an item (and gets it wrong).
    looping: float = 0.0

    @property
    def discordance(self) -> float:
        return self.baseline_only + self.candidate_only


def planned_design() -> SequentialDesign:
    many = {str(index): ItemTotals(1, 1.0) for index in range(5000)}
    return plan_suite("coding", many, spread_from(many, None, None), margin=MARGIN, alpha=ALPHA).design


DESIGN = planned_design()


def draw_pair(scenario: Scenario, rng: random.Random) -> tuple[ItemTotals, ItemTotals, bool]:
    draw = rng.random()
    if draw < scenario.baseline_only:
        pair = (RIGHT, WRONG)
    elif draw < scenario.discordance:
        pair = (WRONG, RIGHT)
    else:
        both = RIGHT if rng.random() < BASELINE_ACCURACY else WRONG
        pair = (both, both)
    looping = rng.random() < scenario.looping
    return pair[0], (WRONG if looping else pair[1]), looping


def run(
    scenario: Scenario, comparisons: int, seed: int = 0, design: SequentialDesign | None = None
) -> tuple[Counter[str], float, Counter[str]]:
    """(verdicts, mean items used, what stopped the suites) over seeded comparisons."""
    verdicts: Counter[str] = Counter()
    stopped_by: Counter[str] = Counter()
    items = []
    for index in range(comparisons):
        rng = random.Random(seed * 1_000_003 + index)
        suite = SequentialSuite(design or DESIGN, looping_floor=0.02, truncation_floor=0.05)
        stop = None
        while stop is None:
            baseline, candidate, looping = draw_pair(scenario, rng)
            stop = suite.add(baseline, candidate, looping=looping, truncated=looping)
        verdicts[stop.verdict] += 1
        stopped_by[stop.by] += 1
        items.append(stop.items)
    return verdicts, sum(items) / len(items), stopped_by


def exact_crossings(design: SequentialDesign, baseline_only: float, candidate_only: float) -> tuple[float, float]:
    """(P(FAIL), P(PASS)) of the looks alone (no monitors), computed exactly: the distribution of
    (baseline-only, candidate-only) counts is carried from look to look, less what crossed."""
    others = 1 - baseline_only - candidate_only
    counts = np.ones((1, 1))
    fail = passed = 0.0
    previous = 0
    for look, size in enumerate(design.sizes):
        new = size - previous
        previous = size
        # The new items' counts, cut where less than 1e-16 of the mass lies beyond.
        most = min(new, int(stats.binom.isf(1e-16, new, baseline_only + candidate_only)) + 1)
        step = np.zeros((most + 1, most + 1))
        for b in range(most + 1):
            c = np.arange(most + 1 - b)
            outcomes = np.stack([np.full_like(c, b), c, new - b - c], axis=1)
            step[b, : most + 1 - b] = stats.multinomial.pmf(outcomes, new, [baseline_only, candidate_only, others])
        counts = signal.fftconvolve(counts, step)
        counts[counts < 1e-18] = 0.0
        crossed = np.zeros_like(counts, dtype=bool)
        for b, c in zip(*np.nonzero(counts), strict=True):
            z = tango_statistic(int(b), int(c), size, -design.margin)
            if z <= -design.fail_bounds[look]:
                fail += counts[b, c]
                crossed[b, c] = True
            elif z >= design.pass_bounds[look]:
                passed += counts[b, c]
                crossed[b, c] = True
        counts[crossed] = 0.0
    return float(fail), float(passed)


def monitor_stops(
    rate: float, runs: int, ratios: tuple[float, ...] = RATE_RATIOS, seed: int = 0, most: int = 10_000
) -> list[int | None]:
    """Items a looping monitor (2% floor) needed to stop at a true looping rate, per seeded run;
    None for a run it did not stop within `most` items."""
    stops: list[int | None] = []
    for index in range(runs):
        rng = random.Random(seed * 1_000_003 + index)
        monitor = RateMonitor("looping", floor=0.02, ratios=ratios)
        stopped = any(monitor.observe(rng.random() < rate) for _ in range(most))
        stops.append(monitor.items if stopped else None)
    return stops
