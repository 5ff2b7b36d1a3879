"""Refuse before sending (issue 35): with --k3-baseline, a temperature, model or plugin-version
difference, or a baseline whose evidence does not hold, was found only after the whole candidate run
had been sent. Now the run stops before its first request, with the reason, and writes no records."""

from __future__ import annotations

import json

import pytest
from run_files import copy_suites, only_run

COMMON = ("--k3-limit", "2", "--k3-max-tokens", "2048", "-p", "no:cacheprovider", "--k3-results-dir", "out")


def run(project: pytest.Pytester, *arguments: str) -> pytest.RunResult:
    return project.runpytest("test_math.py", "--k3-endpoint", "reference:tp8", *COMMON, *arguments)


def test_a_setting_or_a_damaged_baseline_stops_the_run_before_any_request(pytester: pytest.Pytester) -> None:
    copy_suites(pytester.path, ["test_math.py"])
    stored = run(pytester, "--k3-shape", "tp8", "--k3-save-baseline", "--k3-subset-baseline")
    assert stored.ret == 0
    baseline = only_run(pytester.path / "out")
    hot = run(pytester, "--k3-baseline", "tp8", "--k3-shape", "hot", "--k3-temperature", "0.5")
    assert hot.ret == pytest.ExitCode.USAGE_ERROR
    hot.stderr.fnmatch_lines(
        ["*--k3-baseline: this run would differ from the baseline tp8/*temperature*nothing was sent*"]
    )
    assert not list((pytester.path / "out").glob("hot/*/records-*"))
    # The baseline's records cut after the run: refused before anything is sent, as the gate would say.
    summary = json.loads((baseline / "summary.json").read_text())
    summary["records_chain"] = {
        name: {"head": "0" * 64, "records": head["records"] + 1} for name, head in summary["records_chain"].items()
    }
    (baseline / "summary.json").write_text(json.dumps(summary))
    damaged = run(pytester, "--k3-baseline", "tp8", "--k3-shape", "again")
    assert damaged.ret == pytest.ExitCode.USAGE_ERROR
    damaged.stderr.fnmatch_lines(
        ["*--k3-baseline: the baseline's evidence does not hold*records cut at line*nothing was sent*"]
    )
