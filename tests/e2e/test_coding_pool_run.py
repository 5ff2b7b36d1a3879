"""The coding suite on the EvalPlus pools (HumanEval+, MBPP+) against the reference deployment (a SIMULATOR): the
simulator's right answers (the pool's canonical solutions) pass the strong tests in the sandbox
and its wrong ones fail them on an assert, never on a limit; the run records the pool's
provenance."""

from __future__ import annotations

import json

import pytest
from run_files import copy_suites, only_run, summary_of

from k3conformance.datasets.pools import load_pool
from k3conformance.runs.records import iter_records


@pytest.mark.parametrize(("pool_name", "limit"), [("humanevalplus", 10), ("mbppplus", 20)])
def test_the_coding_suite_runs_on_the_pool(pytester: pytest.Pytester, pool_name: str, limit: int) -> None:
    copy_suites(pytester.path, ("test_coding.py",))
    result = pytester.runpytest(
        "--k3-coding-dataset", f"pool:{pool_name}", "--k3-limit", str(limit), "--k3-results-dir", "out", "-q"
    )
    result.assert_outcomes(passed=limit)
    run_dir = only_run(pytester.path / "out")
    details = [
        detail
        for record in iter_records(run_dir, "outcome")
        if record.get("score")
        for detail in record["score"]["details"]
    ]
    outcomes = [str(detail["outcome"]) for detail in details]
    assert len(outcomes) == limit and "passed" in outcomes
    # A wrong answer fails an assert of the tests; a timeout or a broken boundary would be the
    # pool's cost or the runner's limits deciding, not the answer.
    assert any(outcome.startswith("assertion failed") for outcome in outcomes), outcomes
    assert all(outcome == "passed" or outcome.startswith("assertion failed") for outcome in outcomes), outcomes
    assert all((detail["correct"] == 1.0) == (detail["outcome"] == "passed") for detail in details)
    pool = load_pool(pool_name)
    recorded = summary_of(run_dir)["datasets"]["coding"]["pools"][f"pool:{pool_name}"]
    assert recorded == pool.provenance() and recorded["license"] == "Apache-2.0"


def test_both_pools_and_the_authored_tasks_run_together(pytester: pytest.Pytester) -> None:
    copy_suites(pytester.path, ("test_coding.py",))
    spec = "pool:humanevalplus,pool:mbppplus,fixture:coding"
    result = pytester.runpytest("--k3-coding-dataset", spec, "--k3-limit", "12", "--k3-results-dir", "out", "-q")
    # --k3-limit bounds the suite's probes, sent in the gate's stratified order by dataset.
    result.assert_outcomes(passed=12)
    run_dir = only_run(pytester.path / "out")
    records = [json.dumps(record) for record in iter_records(run_dir, "outcome")]
    assert any("HumanEvalPlus/" in record for record in records) and any("MbppPlus/" in record for record in records)
    pools = summary_of(run_dir)["datasets"]["coding"]["pools"]
    assert pools["pool:humanevalplus"] == load_pool("humanevalplus").provenance()
    assert pools["pool:mbppplus"] == load_pool("mbppplus").provenance()
