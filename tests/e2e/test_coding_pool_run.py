"""The coding suite on the HumanEval+ pool against the reference deployment (a SIMULATOR): the
simulator's right answers (the pool's canonical solutions) pass the strong tests in the sandbox
and its wrong ones fail them on an assert, never on a limit; the run records the pool's
provenance."""

from __future__ import annotations

import pytest
from run_files import copy_suites, only_run, summary_of

from k3conformance.datasets.pools import load_pool
from k3conformance.runs.records import iter_records


def test_the_coding_suite_runs_on_the_pool(pytester: pytest.Pytester) -> None:
    copy_suites(pytester.path, ("test_coding.py",))
    result = pytester.runpytest(
        "--k3-coding-dataset", "pool:humanevalplus", "--k3-limit", "10", "--k3-results-dir", "out", "-q"
    )
    result.assert_outcomes(passed=10)
    run_dir = only_run(pytester.path / "out")
    details = [
        detail
        for record in iter_records(run_dir, "outcome")
        if record.get("score")
        for detail in record["score"]["details"]
    ]
    outcomes = [str(detail["outcome"]) for detail in details]
    assert len(outcomes) == 10 and "passed" in outcomes
    # A wrong answer fails an assert of the tests; a timeout or a broken boundary would be the
    # pool's cost or the runner's limits deciding, not the answer.
    assert any(outcome.startswith("assertion failed") for outcome in outcomes), outcomes
    assert all(outcome == "passed" or outcome.startswith("assertion failed") for outcome in outcomes), outcomes
    assert all((detail["correct"] == 1.0) == (detail["outcome"] == "passed") for detail in details)
    pool = load_pool("humanevalplus")
    recorded = summary_of(run_dir)["datasets"]["coding"]["pools"]["pool:humanevalplus"]
    assert recorded == pool.provenance() and recorded["license"] == "Apache-2.0"
