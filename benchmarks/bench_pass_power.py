"""What a PASS costs when items have a difficulty of their own: the plan's design against seeded
comparisons of items with stable solve chances (tests/support/difficulty_simulation.py), per
suite-like pool, at the measured within-item share and in the exchangeable worst case.

    python benchmarks/bench_pass_power.py [--comparisons 400] [--suites 6]
    python benchmarks/bench_pass_power.py --sizes   # what a real K3 gate needs per suite, no simulation

For each pool: P(PASS) for an unchanged deployment, P(FAIL) at a loss of twice the margin,
P(PASS) at a loss of exactly the margin (must stay at or under α), and the mean items to a
decision. Each suite is sized for its share of the run's 0.8 (`--suites` gated suites). The
pools are the shapes of the bundled ones (items, samples, the simulator's accuracies) and the
sizes a real K3 gate would need; the figures go into docs/sequential-gating.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

from difficulty_simulation import Pool, run

from k3conformance.gate.sequential.plan import suite_pass_power
from k3conformance.reference.difficulty import MEASURED_WITHIN_SHARE

SHAPES = (
    ("math (303 items)", 303, 0.9),
    ("coding (177 items)", 177, 0.68),
    # pool:humanevalplus,pool:mbppplus,fixture:coding: 158 + 374 + 13.
    ("coding (545 items)", 545, 0.68),
    ("agentic coding (60 tasks)", 60, 0.68),
    ("agentic coding (360 tasks)", 360, 0.68),
    ("long context (200 a length)", 200, 0.9),
)
SAMPLES = (1, 8)
# Published K3-class accuracies of the suites' kinds of items (docs/suites.md, shared/DATA.md): DeepSWE
# 68% on TP8 (sglang 40751), MATH-500 97% for K2 (its hardest levels lower), HumanEval+ and long
# retrieval near their ceilings.
REAL_SUITES = (
    ("agentic coding (DeepSWE-like)", 0.68),
    ("coding (HumanEval+-like)", 0.9),
    ("math (MATH levels 4-5)", 0.95),
)
SHARES = (("measured (SmolLM2, 0.87)", MEASURED_WITHIN_SHARE), ("steadier (0.5)", 0.5), ("steady (0.25)", 0.25))


def sizes_table(suites: int, margin: float) -> None:
    """Items a fixed-size-equivalent sequential design needs for each suite's PASS power, at k samples a side:
    the plan's own sizing (plan.planned_items) at the spread 2·r·μ(1 − μ)/k of an unchanged deployment."""
    import math

    from k3conformance.gate.sequential.plan import Spread, plan_suite
    from k3conformance.stats.paired import ItemTotals

    power = suite_pass_power(suites)
    one = {"0": ItemTotals(1, 1.0)}
    print(f"items needed for {power:.1%} PASS power per suite ({suites} gated suites), margin {margin * 100:g} pts")
    print("| suite | accuracy | within-item share | 1 sample | 4 samples | 8 samples | 16 samples |")
    print("|---|---|---|---|---|---|---|")
    for name, accuracy in REAL_SUITES:
        for label, share in SHARES:
            cells = []
            for samples in (1, 4, 8, 16):
                sd = math.sqrt(2 * share * accuracy * (1 - accuracy) / samples)
                planned = plan_suite(name, one, Spread(sd, "assumed"), margin=margin, alpha=0.05, pass_power=power)
                cells.append(f"{planned.planned_items:,} ({planned.planned_items * samples:,} answers)")
            print(f"| {name} | {accuracy:.0%} | {label} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--comparisons", type=int, default=400)
    parser.add_argument("--suites", type=int, default=6, help="Gated suites the run's 0.8 is shared over")
    parser.add_argument("--margin", type=float, default=3.0, help="Margin in points")
    parser.add_argument("--sizes", action="store_true", help="Print what a real K3 gate needs per suite instead")
    arguments = parser.parse_args()
    if arguments.sizes:
        sizes_table(arguments.suites, arguments.margin / 100)
        return
    power = suite_pass_power(arguments.suites)
    print(
        f"each suite sized for {power:.1%} PASS power ({arguments.suites} gated suites), margin {arguments.margin} pts"
    )
    print(
        "| pool | samples | items | A/A PASS (measured / exchangeable) | FAIL at 2× margin | PASS at the margin | mean items (A/A) |"
    )
    print("|---|---|---|---|---|---|---|")
    margin = arguments.margin / 100
    for name, items, accuracy in SHAPES:
        for samples in SAMPLES:
            measured = Pool(
                name, items, samples, accuracy, margin, within_share=MEASURED_WITHIN_SHARE, pass_power=power
            )
            exchangeable = Pool(name, items, samples, accuracy, margin, within_share=1.0, pass_power=power)
            a_a, used = run(measured, 0.0, arguments.comparisons)
            worst, _ = run(exchangeable, 0.0, arguments.comparisons)
            double, _ = run(measured, 2 * margin, arguments.comparisons)
            at_margin, _ = run(measured, margin, arguments.comparisons)
            n = arguments.comparisons
            print(
                f"| {name} | {samples} | {items} | {a_a['PASS'] / n:.1%} / {worst['PASS'] / n:.1%} | "
                f"{double['FAIL'] / n:.1%} | {at_margin['PASS'] / n:.1%} | {used:.0f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
