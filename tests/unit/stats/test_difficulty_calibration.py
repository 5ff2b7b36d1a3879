"""The gate's rules where items have a difficulty of their own (reference/difficulty.py), the regime a
real model is in: a loss of exactly the margin still PASSes at most about α of the time, and an
unchanged deployment PASSes as its plan says, at the measured within-item share and exchangeable.
benchmarks/bench_pass_power.py runs the same with more comparisons (docs/sequential-gating.md)."""

from __future__ import annotations

from difficulty_simulation import Pool, run

from k3conformance.reference.difficulty import MEASURED_WITHIN_SHARE

COMPARISONS = 100


def test_a_loss_of_the_margin_passes_at_most_about_alpha_with_item_difficulty() -> None:
    pool = Pool("math", 200, 4, 0.85, within_share=MEASURED_WITHIN_SHARE)
    verdicts, _ = run(pool, 0.03, COMPARISONS, seed=3)
    # α = 0.05; 100 comparisons: 5 expected at α, 11 is beyond about three standard errors of it.
    assert verdicts["PASS"] <= 11, verdicts


def test_an_unchanged_deployment_passes_more_often_the_steadier_its_items() -> None:
    steady = Pool("math", 200, 4, 0.85, within_share=0.5)
    exchangeable = Pool("math", 200, 4, 0.85, within_share=1.0)
    passed_steady = run(steady, 0.0, 60, seed=5)[0]["PASS"]
    passed_exchangeable = run(exchangeable, 0.0, 60, seed=5)[0]["PASS"]
    assert passed_steady > passed_exchangeable, (passed_steady, passed_exchangeable)
