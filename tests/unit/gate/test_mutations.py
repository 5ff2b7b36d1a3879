"""The gate mutation harness (tests/support/gate_mutations.py): from a candidate that FAILs on the
full evidence, every mutation of the evidence, alone and in pairs, must leave the gate at FAIL, at
INCOMPLETE with a reason, or refusing the input, and never exit 0. The few mutations the gate
cannot see through yet are listed in KNOWN_HOLES, and a known hole that starts to hold fails
this test too, so that the list and the table in docs/gate-evidence.md stay true.

Every mutation alone on both cases, and every pair of the mutations that take evidence away or
forge it on the DeepEP case (a single FAIL source, so nothing else keeps it red); the benchmark
`benchmarks/bench_gate_mutations.py` tries every pair on both cases and prints the table."""

from __future__ import annotations

import pytest
from gate_mutations import CASES, KNOWN_HOLES, MUTATIONS, Trial, pairs, start, try_mutations

from k3conformance.gate.settings import GateSettings
from k3conformance.gate.verdict import judge
from k3conformance.runs.schema import validate_summary
from k3conformance.runs.stored import StoredRun


def failures(trials: list[Trial]) -> list[str]:
    return [
        f"{' + '.join(trial.mutations)}: {trial.outcome.shown()} {trial.outcome.reasons[:2]}"
        for trial in trials
        if not trial.held and not trial.known_hole
    ]


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_full_evidence_fails(case: str) -> None:
    baseline, candidate, _ = start(case)
    result = judge(
        StoredRun(validate_summary(baseline, "b"), None),
        StoredRun(validate_summary(candidate, "c"), None),
        GateSettings(),
    )
    assert result.verdict == "FAIL" and result.fails()


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_single_mutation_fails_or_is_incomplete_or_refused(case: str) -> None:
    trials = try_mutations(case, [(mutation,) for mutation in MUTATIONS])
    assert len(trials) == len(MUTATIONS)
    assert failures(trials) == []
    # The known holes are mutations that really change the evidence: at least one of them lets a
    # FAIL through on this case, or the list is stale.
    assert any(not trial.held for trial in trials if trial.known_hole) or case == "megamoe" or not KNOWN_HOLES


def test_pairs_of_mutations_that_take_evidence_away_hold_on_the_deepep_case() -> None:
    removing = [mutation for mutation in MUTATIONS if mutation.removes]
    trials = try_mutations("deepep-4-samples", pairs(removing))
    assert len(trials) == len(removing) * (len(removing) - 1) // 2
    assert failures(trials) == []


def test_every_known_hole_names_a_mutation() -> None:
    assert set(KNOWN_HOLES) <= {mutation.name for mutation in MUTATIONS}
