"""`--k3-limit` keeps every check: at least one item of every kind each check needs, drawn
with the seed, so that a quick run still catches what the full run catches."""

from __future__ import annotations

import shutil

import pytest
from run_files import REPO, check_name, outcomes


@pytest.fixture
def tool_call_project(pytester: pytest.Pytester) -> pytest.Pytester:
    for name in ("conftest.py", "test_tool_calls.py"):
        shutil.copy(REPO / "suites" / name, pytester.path / name)
    return pytester


def test_limited_run_catches_reused_tool_call_ids(tool_call_project: pytest.Pytester) -> None:
    # Issue 13: with the first three items only, no round-trip item ran and this
    # deployment passed every test of the limited run.
    tool_call_project.runpytest_subprocess(
        "--k3-endpoint=reference:reused-tool-ids", "--k3-limit=3", "--k3-results-dir=out", "-p", "no:cacheprovider"
    )
    failed = {check_name(o) for o in outcomes(tool_call_project.path / "out") if o["outcome"] == "failed"}
    assert "tool_calls/round_trip_uses_tool_result[plain]" in failed


def test_limited_run_keeps_every_check_and_category(tool_call_project: pytest.Pytester) -> None:
    full = tool_call_project.runpytest_subprocess("--collect-only", "-q", "-p", "no:cacheprovider")
    limited = tool_call_project.runpytest_subprocess("--collect-only", "-q", "--k3-limit=3", "-p", "no:cacheprovider")

    def checks(lines: list[str]) -> set[str]:
        return {line.split("::")[1].split("[")[0] for line in lines if "::" in line}

    def ids(lines: list[str]) -> set[str]:
        return {line for line in lines if "::" in line}

    assert checks(limited.outlines) == checks(full.outlines)
    kept = ids(limited.outlines)
    assert len(kept) < len(ids(full.outlines))
    for category in ("simple", "parallel", "edge", "named", "irrelevance", "round-trip"):
        assert any(f"-{category}-" in line for line in kept), category


def test_limited_selection_is_seeded(tool_call_project: pytest.Pytester) -> None:
    def kept(seed: str) -> list[str]:
        result = tool_call_project.runpytest_subprocess(
            "--collect-only", "-q", "--k3-limit=3", f"--k3-seed={seed}", "-p", "no:cacheprovider"
        )
        return [line for line in result.outlines if "::" in line]

    assert kept("1") == kept("1")
    assert kept("1") != kept("2")


def test_limited_coding_run_keeps_the_authored_tasks(pytester: pytest.Pytester) -> None:
    for name in ("conftest.py", "test_coding.py"):
        shutil.copy(REPO / "suites" / name, pytester.path / name)
    result = pytester.runpytest_subprocess("--collect-only", "-q", "--k3-limit=3", "-p", "no:cacheprovider")
    kept = [line for line in result.outlines if "::" in line]
    assert any("HumanEval" in line for line in kept)
    assert any("HumanEval" not in line for line in kept), kept


def test_limited_vendor_run_keeps_both_thinking_modes_of_the_defaults_check(pytester: pytest.Pytester) -> None:
    # K3's sampling defaults differ with thinking on and off; a quick run must check both.
    for name in ("conftest.py", "test_request_validation.py"):
        shutil.copy(REPO / "suites" / name, pytester.path / name)
    result = pytester.runpytest_subprocess(
        "--collect-only", "-q", "--k3-limit=1", "--k3-vendor", "-p", "no:cacheprovider"
    )
    kept = [line for line in result.outlines if "test_omitted_sampling_parameters_default_to_k3" in line]
    for thinking in ("thinking", "non-thinking"):
        assert any(f"-defaults-{thinking}]" in line for line in kept), kept
