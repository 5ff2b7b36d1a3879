"""The sequential gate's error rates and expected items, with more comparisons than the tests.

    python benchmarks/bench_sequential_gate.py [--comparisons 2000] [--max-items 600] [--monitors]

Runs the seeded synthetic comparisons of tests/support/sequential_simulation.py (the same
SequentialSuite the gate uses, item by item) for each scenario and prints docs/sequential-gating.md's table:
verdict shares, mean items used, and what stopped the suites. With --max-items the design is
capped (the looks stay at equal fractions of the cap). With --monitors it prints instead the
looping monitor's table: items to a stop at several looping rates, the mixture SPRT against the
single 5× alternative it replaced, and the false alarms of each at the floor.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

import statistics

from sequential_simulation import ALPHA, MARGIN, Scenario, monitor_stops, run

from k3conformance.stats.group_sequential import design
from k3conformance.stats.monitors import RATE_RATIOS

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


# Looping rates: the published MegaMoE case (57 of 113), the simulator's agentic set (21 of 60),
# its old 50-task set (13 of 50), and rates down to 3× the 2% floor.
RATES = (0.504, 0.35, 0.26, 0.20, 0.10, 0.06)


def monitor_table(runs: int) -> None:
    print("| looping rate | mixture: median items (90th percentile) | 5× alone: median items (90th percentile) |")
    print("|---|---|---|")
    for index, rate in enumerate(RATES):
        cells = []
        for ratios in (RATE_RATIOS, (5.0,)):
            stops = sorted(stop or 10_000 for stop in monitor_stops(rate, runs, ratios, seed=200 + index))
            cells.append(f"{statistics.median(stops):.0f} ({stops[int(0.9 * len(stops))]})")
        print(f"| {rate:.1%} | {cells[0]} | {cells[1]} |")
    for ratios in (RATE_RATIOS, (5.0,)):
        alarms = sum(stop is not None for stop in monitor_stops(0.02, runs, ratios, seed=300, most=1000))
        print(f"false alarms at the 2% floor over 1,000 items, {'/'.join(map(str, ratios))}×: {alarms}/{runs}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--comparisons", type=int, default=2000)
    parser.add_argument("--max-items", type=int, default=None)
    parser.add_argument("--monitors", action="store_true", help="the looping monitor's table instead")
    arguments = parser.parse_args()
    if arguments.monitors:
        monitor_table(arguments.comparisons)
        return
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
