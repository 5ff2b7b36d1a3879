"""The sequential gate's error rates and expected items, with more comparisons than the tests.

    python benchmarks/bench_sequential_gate.py [--comparisons 2000] [--max-items 600]

Runs the seeded synthetic comparisons of tests/sequential_simulation.py (the same
SequentialSuite the gate uses, item by item) for each scenario and prints the README's table:
verdict shares, mean items used, and what stopped the suites. With --max-items the design is
capped (the looks stay at equal fractions of the cap).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from sequential_simulation import ALPHA, MARGIN, Scenario, run

from k3conformance.gate.sequential import design

SCENARIOS = {
    "none (A/A), 15% discordant": Scenario(0.075, 0.075),
    "−3 points (the margin), 3% discordant": Scenario(0.03, 0.0),
    "−3 points (the margin), 6% discordant": Scenario(0.045, 0.015),
    "−3 points (the margin), 15% discordant": Scenario(0.09, 0.06),
    "−3 points (the margin), 25% discordant": Scenario(0.14, 0.11),
    "−2.6 points (EP32 DeepEP)": Scenario(0.088, 0.062),
    "−7 points, 15% discordant": Scenario(0.11, 0.04),
    "EP32 MegaMoE (half the outputs loop)": Scenario(0.0, 0.0, looping=0.504),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--comparisons", type=int, default=2000)
    parser.add_argument("--max-items", type=int, default=None)
    arguments = parser.parse_args()
    chosen = None
    if arguments.max_items:
        chosen = design(arguments.max_items, 5, margin=MARGIN, alpha=ALPHA, fail_alpha=ALPHA - 0.005)
    print("| true change | FAIL | PASS | INCONCLUSIVE | mean items | stopped by |")
    print("|---|---|---|---|---|---|")
    for index, (name, scenario) in enumerate(SCENARIOS.items()):
        verdicts, mean_items, stopped_by = run(scenario, arguments.comparisons, seed=100 + index, design=chosen)
        shares = [verdicts[v] / arguments.comparisons for v in ("FAIL", "PASS", "INCONCLUSIVE")]
        stops = ", ".join(f"{by} {count / arguments.comparisons:.0%}" for by, count in stopped_by.most_common())
        print(f"| {name} | {shares[0]:.1%} | {shares[1]:.1%} | {shares[2]:.1%} | {mean_items:.0f} | {stops} |")


if __name__ == "__main__":
    main()
