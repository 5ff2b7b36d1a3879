"""The accuracy suites end to end against the reference deployment: scores recorded per
item with what was extracted and why, accuracy with an interval in the summary, answers
that cannot be scored failing their test, and a missing dataset as one clear message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from run_files import copy_suites, only_run, summary_of

from k3conformance.runs.records import iter_records

EVAL_SUITES = ("test_math.py", "test_coding.py", "test_long_context.py")


@pytest.fixture
def eval_project(pytester: pytest.Pytester) -> pytest.Pytester:
    copy_suites(pytester.path, EVAL_SUITES)
    return pytester


def score_records(run_dir: Path) -> list[dict[str, Any]]:
    return [record for record in iter_records(run_dir, "outcome") if record.get("score")]


def test_healthy_profile_scores_every_suite(eval_project: pytest.Pytester) -> None:
    result = eval_project.runpytest(
        "--k3-results-dir",
        "out",
        "--k3-context-lengths",
        "2000",
        "--k3-coding-dataset",
        "humaneval,fixture:coding",
        "-q",
    )
    # Math: the 41 authored problems and MATH-500's 262 hardest (pool:math_hard).
    result.assert_outcomes(passed=41 + 262 + 164 + 13 + 416)
    assert "| accuracy [95% Wilson]" in result.stdout.str() and "mean output tokens |" in result.stdout.str()
    summary = summary_of(only_run(eval_project.path / "out"))
    math = summary["suites"]["math"]["accuracy"]
    # The tp8 simulator answers graded items correctly with probability 0.9 on average.
    assert math["items"] == 303 and 0.8 <= math["accuracy"] <= 1.0
    assert math["low"] <= math["accuracy"] <= math["high"]
    coding = summary["suites"]["coding"]["accuracy"]
    # Coding at the published TP8 score of 68%.
    assert coding["items"] == 177 and 0.55 <= coding["accuracy"] < 0.8
    # The generated long-context tasks: 416 a length up to 8K (suites/test_long_context.py).
    long_context = summary["suites"]["long_context_2k"]["accuracy"]
    assert long_context["items"] == 416 and 0.8 <= long_context["accuracy"] <= 0.97
    assert summary["datasets"]["coding"]["dataset"] in ("humaneval", "fixture:coding")


def test_records_say_what_was_extracted_and_why(eval_project: pytest.Pytester) -> None:
    eval_project.runpytest(
        "--k3-results-dir", "out", "--k3-limit", "5", "--k3-samples", "2", "--k3-context-lengths", "2000"
    )
    run_dir = only_run(eval_project.path / "out")
    records = score_records(run_dir)
    math = [record for record in records if record["suite"] == "math"]
    assert len(math) == 5
    for record in math:
        score = record["score"]
        assert score["samples"] == 2 and len(score["details"]) == 2
        assert all(
            detail["method"] in ("math-verify", "sympy", "exact") and detail["extracted"] for detail in score["details"]
        )
    coding = [record for record in records if record["suite"] == "coding"]
    reasons = {detail["outcome"] for record in coding for detail in record["score"]["details"]}
    assert "passed" in reasons and len(coding) == 5


def test_a_suite_samples_as_its_own_count_says_and_the_others_as_samples_says(eval_project: pytest.Pytester) -> None:
    eval_project.runpytest(
        "--k3-results-dir", "out", "--k3-limit", "3", "--k3-samples", "2", "--k3-suite-samples", "math=5",
        "--k3-context-lengths", "2000",
    )  # fmt: skip
    run_dir = only_run(eval_project.path / "out")
    samples = {(record["suite"], record["score"]["samples"]) for record in score_records(run_dir)}
    assert {count for suite, count in samples if suite == "math"} == {5}
    assert {count for suite, count in samples if suite != "math"} == {2}
    # Recorded with the run, so a resume and the sequential plan see the same counts.
    assert summary_of(run_dir)["settings"]["suite_samples"] == [["math", 5]]


def test_answers_that_cannot_be_scored_fail(eval_project: pytest.Pytester) -> None:
    # The answer swallowed into the reasoning: content empty with finish_reason stop.
    result = eval_project.runpytest(
        "--k3-endpoint",
        "reference:empty-content",
        "--k3-results-dir",
        "out",
        "--k3-limit",
        "3",
        "--k3-context-lengths",
        "2000",
    )
    # --k3-limit keeps one item of every kind: the long-context suite's four kinds make 4.
    result.assert_outcomes(failed=3 + 3 + 4)
    assert "[layer: parser] expected an answer in content after the reasoning" in result.stdout.str()


def test_missing_dataset_is_one_clear_message(eval_project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(eval_project.path / "hf-home"))
    result = eval_project.runpytest("--k3-math-dataset", "hub:openai/gsm8k:main@test")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: dataset hub:openai/gsm8k:main@test is unavailable: *--k3-math-dataset*"])
    assert "Traceback" not in result.stderr.str()

    missing = eval_project.runpytest("--k3-coding-dataset", "file:/nonexistent/tasks.jsonl")
    assert missing.ret == pytest.ExitCode.USAGE_ERROR
    missing.stderr.fnmatch_lines(["ERROR: dataset file:/nonexistent/tasks.jsonl is unavailable: *--k3-coding-dataset*"])


@pytest.mark.parametrize("name", ["mbpp.jsonl", "openai_humaneval.jsonl"])
def test_coding_datasets_in_their_own_formats_run(tmp_path: Path, name: str) -> None:
    from k3conformance.datasets.suite_items import load_coding_dataset
    from k3conformance.sandbox import run_python
    from k3conformance.sandbox.split import split_program
    from k3conformance.scoring.code_solutions import humaneval_parts

    solution = "def add(a, b):\n    return a + b\n"
    if name.startswith("mbpp"):
        row = {
            "task_id": 11,
            "text": "Write a function add(a, b).",
            "code": solution,
            "test_list": ["assert add(1, 2) == 3", "assert add(-1, 1) == 0"],
        }
    else:
        row = {
            "task_id": "HumanEval/x",
            "prompt": "def add(a, b):\n",
            "canonical_solution": "    return a + b\n",
            "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n",
            "entry_point": "add",
        }
    path = tmp_path / name
    path.write_text(json.dumps(row) + "\n")
    (item,) = load_coding_dataset(f"file:{path}", None).items
    # Split and sealed, as the coding suite runs them.
    for code, passes in ((solution, True), (solution.replace("return a + b", "return a - b"), False)):
        solution_part, tests = humaneval_parts(item, code) if "test" in item else (code, item["tests"])
        assert run_python(split_program(solution_part, tests), seal=True).passed is passes


def test_without_a_baseline_accuracy_is_shown_as_measured_not_as_passed(eval_project: pytest.Pytester) -> None:
    """Reproduction (issue 11): the suite table said "checks passed 100.0%" at any accuracy,
    even 100% looping, on a run with no baseline to judge it against."""
    result = eval_project.runpytest(
        "test_coding.py",
        "--k3-endpoint",
        "reference:ep32-megamoe",
        "--k3-coding-dataset",
        "humaneval",
        "--k3-limit",
        "12",
        "--k3-max-tokens",
        "8192",
        "--k3-results-dir",
        "out",
    )
    output = result.stdout.str()
    assert result.ret == 0
    result.stdout.fnmatch_lines(["| coding * 12 * 12 * 12 * 0 * 0 * 0 * measured *"])
    assert "100.0% |" not in output.split("| suite ")[1].split("\n\n")[0]
    assert "no verdict on accuracy, looping or truncation is given without a baseline" in output
