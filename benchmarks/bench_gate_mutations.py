"""The gate mutation harness as a table: how many mutations of the evidence were tried on each
starting case, alone and in pairs, and how many held (FAIL, INCOMPLETE with a reason, or the
input refused; never exit 0).

    python benchmarks/bench_gate_mutations.py [--singles-only] [--show-not-held]

The cases and mutations are those of tests/support/gate_mutations.py (and of its test,
tests/unit/gate/test_mutations.py, which tries fewer pairs). Pairs are tried among the
mutations that got a verdict alone: a pair with a refused input is refused as that input.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))

from gate_mutations import CASES, MUTATIONS, judged_singly, pairs, table, try_mutations


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--singles-only", action="store_true", help="Try each mutation alone only")
    parser.add_argument("--show-not-held", action="store_true", help="List every trial that did not hold")
    arguments = parser.parse_args()
    trials = []
    started = time.perf_counter()
    for case in CASES:
        singles = try_mutations(case, [(mutation,) for mutation in MUTATIONS])
        trials += singles
        if not arguments.singles_only:
            trials += try_mutations(case, pairs(judged_singly(singles)))
    print("\n".join(table(trials)))
    print(f"\n{len(trials)} trials in {time.perf_counter() - started:.0f} s")
    not_held = [trial for trial in trials if not trial.held]
    if arguments.show_not_held:
        for trial in not_held:
            known = " (known hole)" if trial.known_hole else ""
            print(f"- {trial.case}: {' + '.join(trial.mutations)}: {trial.outcome.shown()}{known}")
    return 1 if any(not trial.known_hole for trial in not_held) else 0


if __name__ == "__main__":
    raise SystemExit(main())
