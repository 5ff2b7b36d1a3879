"""Wrong PASS at the degenerate edges (issue 21, reproduction 2): baselines whose items are each
always right or always wrong on every sample, and a candidate that loses exactly the margin.

    python benchmarks/bench_degenerate_pass.py [--items 41] [--samples 4] [--trials 4000] [--seed 1]

Baselines (each item's share of right samples is 0 or 1, so every paired difference is equal or
nearly so wherever the candidate is unchanged):

- all right: every item right on every sample; the candidate right on each sample with
  probability 1 − loss;
- mixed: a fraction of the items always right, the rest always wrong (25%, 50%, 75% right); the
  candidate loses only on the right ones, each sample with probability loss / fraction, so that
  the mean loss over all items is `loss`;
- all wrong: no item right; the candidate cannot lose, so only its PASS rate when unchanged is
  shown (a PASS there is right: no loss is possible).

For a true loss equal to the margin (3 points) and for no loss, the share of trials the
sequential rule (5 looks) and the fixed-size comparison end in PASS, at one-sided α 0.05. The
worst wrong PASS over the rows is printed last; docs/gate-evidence.md quotes the table.
"""

from __future__ import annotations

import argparse
import random

from k3conformance.gate.sequential.rule import SequentialSuite
from k3conformance.stats.group_sequential import SequentialDesign, design
from k3conformance.stats.paired import PASS, ItemTotals, compare_scores

MARGIN, ALPHA = 0.03, 0.05
BASELINES = {
    "all right": 1.0,
    "mixed 75% right": 0.75,
    "mixed 50% right": 0.5,
    "mixed 25% right": 0.25,
    "all wrong": 0.0,
}


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


def trial(
    rng: random.Random, items: int, samples: int, right_share: float, loss: float
) -> tuple[list[ItemTotals], list[ItemTotals]]:
    """One baseline of items always right or always wrong (in a random order) and its candidate."""
    right_items = round(items * right_share)
    rights = [True] * right_items + [False] * (items - right_items)
    rng.shuffle(rights)
    # The loss falls on the right items only, so that it averages `loss` over all items.
    per_sample = loss / right_share if right_share else 0.0
    base = [ItemTotals(samples, float(samples if right else 0)) for right in rights]
    cand = [
        ItemTotals(samples, float(sum(rng.random() >= per_sample for _ in range(samples))) if right else 0.0)
        for right in rights
    ]
    return base, cand


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=41)
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--trials", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=1)
    arguments = parser.parse_args()
    rng = random.Random(arguments.seed)
    chosen = design(arguments.items, 5, margin=MARGIN, alpha=ALPHA)
    print(
        f"{arguments.items} items, {arguments.samples} samples each, {arguments.trials} trials per row, seed {arguments.seed}"
    )
    print("| baseline | rule | wrong PASS at a true loss = margin | PASS of an unchanged candidate |")
    print("|---|---|---|---|")
    worst = (0.0, "")
    for baseline, right_share in BASELINES.items():
        for label, rule in (("sequential", chosen), ("fixed size", None)):
            shares = []
            for loss in (MARGIN, 0.0):
                if loss and not right_share:
                    shares.append(None)
                    continue
                passed = sum(
                    passes(rule, *trial(rng, arguments.items, arguments.samples, right_share, loss))
                    for _ in range(arguments.trials)
                )
                shares.append(passed / arguments.trials)
            wrong, unchanged = shares
            if wrong is not None and wrong >= worst[0]:
                worst = (wrong, f"{baseline}, {label}")
            shown = "(no loss possible)" if wrong is None else f"{wrong:.1%}"
            print(f"| {baseline} | {label} | {shown} | {unchanged:.1%} |", flush=True)
    print(f"worst wrong PASS: {worst[0]:.1%} ({worst[1]}); one-sided α is {ALPHA:.0%}")


if __name__ == "__main__":
    main()
