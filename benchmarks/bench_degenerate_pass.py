"""Wrong PASS at the degenerate edge (issue 21, reproduction 2): a baseline right on every sample
of every item, and a candidate right on each sample with probability 1 − loss.

    python benchmarks/bench_degenerate_pass.py [--items 41] [--samples 4] [--trials 4000] [--seed 1]

For a true loss equal to the margin (3 points) and for no loss, the share of trials the
sequential rule (5 looks) and the fixed-size comparison end in PASS, at one-sided α 0.05.
"""

from __future__ import annotations

import argparse
import random

from k3conformance.gate.sequential.rule import SequentialSuite
from k3conformance.stats.group_sequential import SequentialDesign, design
from k3conformance.stats.paired import PASS, ItemTotals, compare_scores

MARGIN, ALPHA = 0.03, 0.05


def passes(chosen: SequentialDesign | None, base: list[ItemTotals], cand: list[ItemTotals]) -> bool:
    if chosen is None:
        before = {str(index): totals for index, totals in enumerate(base)}
        after = {str(index): totals for index, totals in enumerate(cand)}
        result = compare_scores(before, after, margin=MARGIN, alpha=ALPHA)
        return result is not None and result.verdict == PASS
    suite = SequentialSuite(chosen, looping_floor=0.02, truncation_floor=0.05)
    for b, c in zip(base, cand, strict=True):
        stop = suite.add(b, c, looping=False, truncated=False)
        if stop is not None:
            return stop.verdict == PASS
    return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=41)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--trials", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=1)
    arguments = parser.parse_args()
    rng = random.Random(arguments.seed)
    chosen = design(arguments.items, 5, margin=MARGIN, alpha=ALPHA)
    samples = arguments.samples
    for label, rule in (("sequential", chosen), ("fixed size", None)):
        for loss in (MARGIN, 0.0):
            passed = 0
            for _ in range(arguments.trials):
                base = [ItemTotals(samples, float(samples))] * arguments.items
                cand = [
                    ItemTotals(samples, float(sum(rng.random() < 1 - loss for _ in range(samples))))
                    for _ in range(arguments.items)
                ]
                passed += passes(rule, base, cand)
            print(
                f"{label}: {arguments.items} items, {samples} samples, true loss {loss * 100:.0f} pts: "
                f"PASS {passed / arguments.trials:.1%} of {arguments.trials}",
                flush=True,
            )


if __name__ == "__main__":
    main()
