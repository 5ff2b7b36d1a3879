"""Rounds of samples per item end to end on the reference deployment (a simulator): a tp8 baseline
of the math suite (41 items, fewer than its design wants) stored with 4 samples per item, then
candidates that sample 1, 2, 4 and 8 per item in rounds on the same items."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from run_files import copy_suites

from k3conformance.cli import main as cli_main
from k3conformance.runs.records import iter_records

SUITE = "math"
# The authored 41 problems alone (the default adds the MATH pool): fewer items than the design wants.
COMMON = (
    "test_math.py",
    "--k3-math-dataset",
    "fixture:math",
    "--k3-results-dir",
    "out",
    "-p",
    "no:cacheprovider",
    "-p",
    "no:xdist",
)
# Stops the session, as a kill would, when the named test is about to run (KILL_AT in the environment).
KILL_HOOK = """

def pytest_runtest_setup(item):
    import os, signal
    if os.environ.get("KILL_AT") and item.name.endswith(os.environ["KILL_AT"]):
        os.kill(os.getpid(), signal.SIGKILL)
"""


def baseline(pytester: pytest.Pytester, samples: int) -> None:
    copy_suites(pytester.path, ["test_math.py"])
    with (pytester.path / "conftest.py").open("a") as conftest:
        conftest.write(KILL_HOOK)
    stored = pytester.runpytest(
        "--k3-endpoint", "reference:tp8", "--k3-shape", "tp8", "--k3-save-baseline", "--k3-samples", str(samples), *COMMON
    )  # fmt: skip
    assert stored.ret == 0


def run_dir_of(pytester: pytest.Pytester, shape: str) -> Path:
    (run_dir,) = (path for path in (pytester.path / "out" / shape).iterdir() if path.is_dir())
    return run_dir


def candidate_arguments(shape: str, *extra: str) -> list[str]:
    return ["--k3-endpoint", "reference:tp8", "--k3-baseline", "tp8", "--k3-shape", shape, *COMMON, *extra]


def sequential_block(run_dir: Path) -> dict[str, Any]:
    block: dict[str, Any] = json.loads((run_dir / "summary.json").read_text())["sequential"][SUITE]
    return block


def test_a_run_against_a_multi_sample_baseline_samples_in_rounds_and_compare_replays_it(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline(pytester, 4)
    result = pytester.runpytest(*candidate_arguments("again", "-rs"))
    output = result.stdout.str()
    assert "math: sequential PASS by the look 8 of 8 (round 4: 8 samples per item on 41 items)" in output
    assert "a sequential run samples in rounds of 1, 2, 4, 8 samples per item on the same items" in output
    run_dir = run_dir_of(pytester, "again")
    block = sequential_block(run_dir)
    design, stop, order = block["design"], block["stop"], block["order"]
    assert design["sizes"] == [8, 16, 25, 33, 41, 41, 41, 41] and design["samples"] == [1, 1, 1, 1, 1, 2, 4, 8]
    # The round tests, ids `test_math_answer[ITEM-samples-FROM-TO]`, in rounds, each in the committed order.
    outcomes = list(iter_records(run_dir, "outcome"))
    ids = [record["nodeid"].split("[", 1)[1].rstrip("]") for record in outcomes]
    for start, end in ((1, 2), (2, 4), (4, 8)):
        round_ids = [
            test_id.removesuffix(f"-samples-{start}-{end}")
            for test_id in ids
            if test_id.endswith(f"-samples-{start}-{end}")
        ]
        assert round_ids == order
    # Records keep absolute sample indices: each item's samples 0 … s−1, each once.
    looked = design["samples"][stop["look"] - 1]
    samples = Counter((record["item"], record["sample"]) for record in iter_records(run_dir, "response"))
    assert set(samples.values()) == {1}
    assert {sample for _, sample in samples} == set(range(looked))
    # The reference deployment answers sample k the same on both runs: at 4 samples the candidate
    # equals the baseline item by item. That decided PASS at round 3 while the t statistic sat at
    # its cap of +12 on a spread of 0; with fewer than 10 items disagreeing the spread is now floored
    # (issue 21, reproduction 2), so equal scores on 41 items decide nothing, and the round of 8
    # samples, whose item means differ from the baseline's 4-sample means, decides (PASS).
    assert stop == {"verdict": "PASS", "by": "look", "items": 41, "look": 8}
    assert block["samples_used"] == 41 * 8
    assert not [record for record in outcomes if record["outcome"] == "skipped"]
    assert not [record for record in iter_records(run_dir, "cancelled") if record["suite"] == SUITE]
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["suites"][SUITE]["scores"][order[0]]["samples"] == 8
    # `compare` replays the rule from the stored scores per round: the same path and verdict.
    capsys.readouterr()
    compare = ["compare", "tp8", "again", "--results-dir", str(pytester.path / "out"), "--format", "json"]
    assert cli_main(compare) == 0
    compared = json.loads(capsys.readouterr().out)["sequential"][SUITE]
    for key in ("design", "looks", "monitors", "stop", "items", "samples_used"):
        assert compared[key] == block[key], key
    # The design is recomputed from the baseline, never read from the summary (issue 21, reproduction 3):
    # a stored design that is not the plan's (here an item-only one, as written before rounds existed)
    # gets no sequential decision, and the suite is judged fixed-size.
    del block["design"]["samples"], block["design"]["information"], block["round_totals"]
    block["design"]["sizes"], block["design"]["fail_bounds"] = [8, 16, 25, 33, 41], block["design"]["fail_bounds"][:5]
    block["design"]["pass_bounds"] = block["design"]["pass_bounds"][:5]
    summary["sequential"][SUITE] = block
    (run_dir / "summary.json").write_text(json.dumps(summary))
    assert cli_main(compare) in (0, 1)
    replayed = json.loads(capsys.readouterr().out)
    assert SUITE not in replayed["sequential"]
    assert f"{SUITE}: the stored sequential design is not the one the plan makes from the baseline" in " ".join(
        replayed["notes"]
    )


def test_an_interrupted_rounds_run_resumes_without_resending_finished_requests(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    baseline(pytester, 4)
    monkeypatch.setenv("KILL_AT", "-samples-2-4]")
    killed = pytester.runpytest_subprocess(*candidate_arguments("again"))
    assert killed.ret == -9
    run_dir = run_dir_of(pytester, "again")
    first = Counter((r["item"], r["sample"]) for r in iter_records(run_dir, "response") if r["status"] == "ok")
    # Rounds 1 and 2 (samples 0 and 1) finished before the kill.
    assert len(first) >= 82 and set(first.values()) == {1}
    monkeypatch.delenv("KILL_AT")
    resumed = pytester.runpytest_subprocess(*candidate_arguments("again"), "--k3-resume")
    assert resumed.ret == 0, resumed.stdout.str()[-2000:]
    after = Counter((r["item"], r["sample"]) for r in iter_records(run_dir, "response") if r["status"] == "ok")
    assert set(after.values()) == {1}, "a finished request was sent again"
    assert set(first) <= set(after)
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["requests"]["resumed"] == len(first) and summary["requests"]["sent"] == len(after) - len(first)
    sequential_order = summary["sequential"][SUITE]["order"]
    assert summary["sequential"][SUITE]["stop"]["look"] == 8 and len(sequential_order) == 41


def test_without_a_multi_sample_baseline_or_with_rounds_off_the_run_is_item_only(pytester: pytest.Pytester) -> None:
    baseline(pytester, 1)
    result = pytester.runpytest(*candidate_arguments("again"))
    assert "-samples-" not in result.stdout.str() and "samples in rounds" not in result.stdout.str()
    block = sequential_block(run_dir_of(pytester, "again"))
    assert "samples" not in block["design"] and "round_totals" not in block
    assert {record["sample"] for record in iter_records(run_dir_of(pytester, "again"), "response")} == {0}
    # With a baseline of several samples, --k3-sample-rounds none keeps the run item-only too.
    os.rename(pytester.path / "out", pytester.path / "out-one-sample")
    baseline(pytester, 4)
    pytester.runpytest(*candidate_arguments("off", "--k3-sample-rounds", "none"))
    block = sequential_block(run_dir_of(pytester, "off"))
    assert "samples" not in block["design"] and len(block["design"]["sizes"]) == 5
