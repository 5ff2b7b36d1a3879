"""`k3conformance plan BASELINE` and the plan in a gated run's header: the same figures, sized
from what the stored baseline holds, without an endpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from run_files import copy_suites

from k3conformance.cli import main as cli_main
from k3conformance.runs.records import STATUS_COMPLETE, SUMMARY_FILE


def store(results: Path, run_id: str, coding: dict[str, tuple[int, float]], status: str = STATUS_COMPLETE) -> Path:
    run_dir = results / "tp8" / run_id
    run_dir.mkdir(parents=True)
    scores = {
        item: {"samples": samples, "correct": correct, "no_answer": 0, "truncated": 0, "looping": 0}
        for item, (samples, correct) in coding.items()
    }
    summary = {
        "shape": "tp8",
        "run_id": run_id,
        "status": status,
        "baseline": True,
        "suites": {"coding": {"scores": scores}},
    }
    (run_dir / SUMMARY_FILE).write_text(json.dumps(summary))
    return run_dir


def single_samples(count: int, flip: int = 0) -> dict[str, tuple[int, float]]:
    """One sample per item, two in three right; the first `flip` items scored the other way."""
    return {f"item-{i}": (1, float((i % 3 > 0) != (i < flip))) for i in range(count)}


def test_plan_assumes_a_discordance_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store(tmp_path, "20260101T000000Z-aaaaaa", single_samples(300))
    assert cli_main(["plan", "tp8", "--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "sequential plan against the baseline tp8/20260101T000000Z-aaaaaa (α 0.05, 5 looks)" in out
    assert "coding: 300 items in the baseline at 66.7%" in out
    assert "ASSUMED: 15% of items discordant" in out
    assert "maximum 300 items (capped: 1109 planned for 80% power); looks at 60, 120, 180, 240, 300" in out
    assert "minimum detectable drop at 300 items" in out


def test_plan_uses_an_a_a_pair_stored_next_to_the_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store(tmp_path, "20260101T000000Z-aaaaaa", single_samples(2000, flip=100))
    # An unfinished run is no partner.
    store(tmp_path, "20260103T000000Z-cccccc", single_samples(2000, flip=900), status="interrupted")
    store(tmp_path, "20260102T000000Z-bbbbbb", single_samples(2000))
    # The newest complete run is the baseline; the other complete one is its A/A partner.
    assert cli_main(["plan", "tp8", "--results-dir", str(tmp_path), "--format", "json"]) == 0
    (plan,) = json.loads(capsys.readouterr().out)["suites"]
    assert plan["spread"]["source"].startswith("the A/A pair with tp8/20260101T000000Z-aaaaaa (2000 items, 5%")
    # 5% discordance needs far fewer items than the assumed 15%: about a third.
    assert 330 <= plan["planned_items"] <= 400
    assert plan["design"]["max_items"] == plan["planned_items"]


def test_plan_refuses_what_it_cannot_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["plan", "tp8", "--results-dir", str(tmp_path)]) == 2
    assert "no stored runs of shape 'tp8'" in capsys.readouterr().err
    store(tmp_path, "20260101T000000Z-aaaaaa", single_samples(50))
    assert cli_main(["plan", "tp8", "--results-dir", str(tmp_path), "--margin", "0"]) == 2
    assert "needs a margin above 0" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["plan", "tp8", "--looks", "0"])
    assert exit_info.value.code == 2


def test_a_gated_run_prints_the_plan_in_its_header(pytester: pytest.Pytester) -> None:
    copy_suites(pytester.path, ["test_math.py"])
    store(pytester.path / "out", "20260101T000000Z-aaaaaa", single_samples(120))
    result = pytester.runpytest(
        "test_math.py",
        "--k3-baseline",
        "tp8",
        "--k3-results-dir",
        "out",
        "--k3-looks",
        "3",
        "--k3-max-items",
        "90",
        "-k",
        "no_test_has_this_name",
        "-p",
        "no:cacheprovider",
    )
    output = result.stdout.str()
    assert "k3conformance: sequential plan against the baseline tp8/20260101T000000Z-aaaaaa (α 0.05, 3 looks)" in output
    assert "k3conformance:   maximum 90 items (capped: 1093 planned for 80% power); looks at 30, 60, 90" in output
