"""`k3conformance plan BASELINE` and the plan in a gated run's header: the same figures, sized
from what the stored baseline holds, without an endpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from run_files import copy_suites
from stored_runs import write_run

from k3conformance.cli import main as cli_main
from k3conformance.runs.records import STATUS_COMPLETE


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
    write_run(run_dir, summary)
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
    # Capped by its items, with one sample per item: what samples would buy is not known, and says why.
    assert "more samples per item: gain unknown (one sample per item: the within-item spread is unmeasured" in out
    assert "a loss concentrated on a few broken items needs more items, not more samples" in out


def halves(count: int, samples: int = 4) -> dict[str, tuple[int, float]]:
    """Every item right on half its samples: a per-sample variance of 4/3 · 1/4 = 1/3 per item."""
    return {f"item-{i}": (samples, samples / 2) for i in range(count)}


def test_plan_weighs_more_samples_per_item_for_a_suite_capped_by_its_items(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store(tmp_path, "20260101T000000Z-aaaaaa", halves(200))
    assert cli_main(["plan", "tp8", "--results-dir", str(tmp_path), "--format", "json"]) == 0
    (plan,) = json.loads(capsys.readouterr().out)["suites"]
    assert plan["design"]["max_items"] == 200 < plan["planned_items"]
    outlook = plan["samples_outlook"]
    # No A/A pair: the spread is sampling noise only, so nothing is left between items (a lower bound).
    assert outlook["within"] == pytest.approx(1 / 3) and outlook["between"] == 0.0
    assert outlook["baseline_noise"] == pytest.approx(1 / 12)
    drops = dict(outlook["drops"])
    assert list(drops) == [2, 4, 8]
    # At the baseline's own 4 samples the candidate's noise is what the plan assumed: the same drop.
    assert drops[4] == pytest.approx(plan["min_detectable_drop"], rel=1e-6)
    assert drops[2] > drops[4] > drops[8] > outlook["limit_drop"] > plan["margin"]
    assert cli_main(["plan", "tp8", "--results-dir", str(tmp_path), "--sample-rounds", "2,16"]) == 0
    out = capsys.readouterr().out
    assert "minimum detectable drop with more candidate samples per item on the same 200 items: 2 → " in out
    assert ", 16 → " in out and "never below" in out
    assert "the between-item spread is taken as 0, a lower bound" in out


def test_more_samples_cannot_remove_the_between_item_spread_of_an_a_a_pair(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The A/A partner (the older run) gets half the items always right and half always wrong: each
    # item differs from the baseline by ±0.5, beyond the sampling noise of 4 samples a side.
    store(tmp_path, "20260101T000000Z-aaaaaa", {f"item-{i}": (4, 4.0 * (i % 2)) for i in range(200)})
    store(tmp_path, "20260102T000000Z-bbbbbb", halves(200))
    assert cli_main(["plan", "tp8", "--results-dir", str(tmp_path), "--format", "json"]) == 0
    (plan,) = json.loads(capsys.readouterr().out)["suites"]
    assert plan["spread"]["source"].startswith("the A/A pair with tp8/20260101T000000Z-aaaaaa")
    outlook = plan["samples_outlook"]
    # The spread of d (1/4, unbiased over 200 items) less the noise of 4 samples on each side (2 · 1/3 / 4).
    assert outlook["between"] == pytest.approx(0.25 * 200 / 199 - 1 / 6)
    drops = dict(outlook["drops"])
    assert drops[2] > drops[8] > outlook["limit_drop"]
    # What is left with unlimited samples is the between-item part: the drop stays well above the
    # no-A/A figure for the same baseline, whose between-item spread is 0.
    store(tmp_path / "alone", "20260102T000000Z-bbbbbb", halves(200))
    assert cli_main(["plan", "tp8", "--results-dir", str(tmp_path / "alone"), "--format", "json"]) == 0
    (alone,) = json.loads(capsys.readouterr().out)["suites"]
    assert outlook["limit_drop"] > alone["samples_outlook"]["limit_drop"] + 0.02


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


def test_items_that_never_vary_leave_nothing_for_more_samples(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store(tmp_path, "20260101T000000Z-aaaaaa", {f"item-{i}": (4, 4.0 * (i % 2)) for i in range(200)})
    assert cli_main(["plan", "tp8", "--results-dir", str(tmp_path), "--format", "json"]) == 0
    (plan,) = json.loads(capsys.readouterr().out)["suites"]
    assert plan["spread"]["source"].endswith("(no A/A pair, no item's score varied across its samples)")
    outlook = plan["samples_outlook"]
    # The sampling noise is measured, and 0: the whole assumed spread is between items.
    assert outlook["within"] == 0.0 and outlook["between"] == pytest.approx(0.15)
    assert [drop for _, drop in outlook["drops"]] == pytest.approx([plan["min_detectable_drop"]] * 3)
