"""The gate's verdict from two run summaries, without running anything."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
from stored_runs import write_run

from k3conformance.cli import main as cli_main
from k3conformance.deployment.cookbook import get_shape
from k3conformance.deployment.shapes import server_args
from k3conformance.gate.report import markdown_report, text_report
from k3conformance.gate.settings import GateSettings
from k3conformance.gate.verdict import judge
from k3conformance.runs.schema import SchemaError, validate_summary
from k3conformance.runs.stored import StoredRun

_RUN_IDS = itertools.count(1)


def summary(
    shape: str = "tp8",
    *,
    status: str = "complete",
    right: int = 90,
    items: int = 100,
    looping: int = 0,
    suites: tuple[str, ...] = ("agentic_coding", "math"),
    server_shape: str | None = "tp8",
    checks: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    scores = {
        f"item-{i}": {
            "samples": 1,
            "correct": float(i < right),
            "truncated": int(i >= items - looping),
            "looping": int(i >= items - looping),
            "no_answer": 0,
        }
        for i in range(items)
    }
    described = get_shape(server_shape) if server_shape else None
    result: dict[str, Any] = {
        # One id per summary built: `compare` refuses a candidate that is the baseline itself.
        "run_id": f"run-{shape}-{next(_RUN_IDS)}",
        "shape": shape,
        "status": status,
        "simulator": False,
        "server_info": {"get_server_info": server_args(described)} if described else {},
        "suites": {suite: {"scores": scores, "checks": {}} for suite in suites},
        # The datasets the items came from: without them the gate cannot show both sides asked the same.
        "datasets": {suite: {"items": sorted(scores), "sources": {f"fixture:{suite}": "sha-1"}} for suite in suites},
    }
    if checks:
        result["suites"]["reasoning"] = {"scores": {}, "checks": checks}
    return result


def drop_items(data: dict[str, Any], suite: str, items: range, *, keep_entry: bool = False) -> dict[str, Any]:
    scores = data["suites"][suite]["scores"] = dict(data["suites"][suite]["scores"])
    for index in items:
        if keep_entry:
            scores[f"item-{index}"] = {"samples": 0, "correct": 0.0, "truncated": 0, "looping": 0, "no_answer": 0}
        else:
            del scores[f"item-{index}"]
    return data


def run(data: dict[str, Any]) -> StoredRun:
    return StoredRun(validate_summary(data, "test"), None)


def test_identical_large_runs_pass() -> None:
    result = judge(run(summary(items=2000, right=1800)), run(summary(items=2000, right=1800)), GateSettings())
    assert result.verdict == "PASS" and not result.fails()
    assert result.reasons == []


def test_looping_alone_fails_the_gate() -> None:
    result = judge(
        run(summary(items=2000, right=1800)), run(summary(items=2000, right=1800, looping=60)), GateSettings()
    )
    assert result.verdict == "FAIL"
    assert any("looping rate 0.0% → 3.0%" in reason for reason in result.reasons)


def test_unfinished_candidate_is_incomplete() -> None:
    result = judge(
        run(summary(items=2000, right=1800)), run(summary(items=2000, right=1800, status="incomplete")), GateSettings()
    )
    assert result.verdict == "INCOMPLETE" and result.fails()
    assert any("--k3-resume" in reason for reason in result.reasons)


def test_a_fail_outranks_incomplete() -> None:
    result = judge(run(summary()), run(summary(right=40, status="incomplete")), GateSettings())
    assert result.verdict == "FAIL"
    assert [reason.split(":")[0] for reason in result.reasons][:2] == ["FAIL", "FAIL"]


def test_unknown_shapes_need_agentic_coding_and_math() -> None:
    """vLLM and llama.cpp do not report their launch arguments: the shape may differ."""
    baseline = summary("vllm-tp8", server_shape=None)
    result = judge(run(baseline), run(summary("vllm-ep8", server_shape=None, suites=("math",))), GateSettings())
    assert result.verdict == "INCOMPLETE"
    assert result.shape is not None and result.shape.missing_suites == ("agentic_coding",)


def test_same_shape_candidate_must_still_run_every_suite_the_baseline_scored() -> None:
    """Reproduction (issue 11): this was PASS without the coding suite."""
    result = judge(
        run(summary(items=2000, right=1800)), run(summary(items=2000, right=1800, suites=("math",))), GateSettings()
    )
    assert result.shape is not None and result.shape.differences == []
    assert result.verdict == "INCOMPLETE" and result.fails()
    assert any("coding: scored on the baseline but not on the candidate" in reason for reason in result.reasons)


def test_contradicting_shape_label_is_reported() -> None:
    candidate = summary("tp8", server_shape="ep32-megamoe")
    result = judge(run(summary()), run(candidate), GateSettings())
    assert result.shape is not None and result.shape.contradictions
    assert any("but the server reports tp_size=32" in line for line in result.shape.contradictions)


def test_check_regression_and_still_failing_checks() -> None:
    before = {"a[plain]": {"passed": 4, "failed": 0}, "b[plain]": {"passed": 2, "failed": 2}}
    after: dict[str, dict[str, Any]] = {
        "a[plain]": {"passed": 1, "failed": 3, "excerpts": {"api": "x: [layer: api] expected stop"}},
        "b[plain]": {"passed": 0, "failed": 4},
    }
    result = judge(run(summary(checks=before)), run(summary(checks=after)), GateSettings())
    assert [(r.suite, r.check) for r in result.regressions] == [("reasoning", "a[plain]")]
    assert result.verdict == "FAIL"
    assert result.regressions[0].excerpt == "x: [layer: api] expected stop"


def test_nothing_in_common_is_incomplete() -> None:
    result = judge(run(summary(suites=("math",))), run(summary(suites=("coding",))), GateSettings())
    assert result.verdict == "INCOMPLETE"


def test_reports_are_plain_data_and_readable() -> None:
    result = judge(run(summary()), run(summary(right=60, looping=30)), GateSettings(gate="strict"))
    assert json.loads(json.dumps(result.to_dict()))["verdict"] == "FAIL"
    text = "\n".join(text_report(result))
    assert text.startswith("gate: FAIL") and "min detectable drop" in text and "looping" in text
    markdown = markdown_report(result, {"simulator": True})
    assert "| suite " in markdown and "simulator" in markdown


def test_simulator_against_real_deployment_is_noted() -> None:
    simulated = summary()
    simulated["simulator"] = True
    result = judge(run(simulated), run(summary()), GateSettings())
    assert any("simulator" in note for note in result.notes)


# --- missing evidence is INCOMPLETE, never PASS (issue 11) --------------------------------


def test_baseline_without_the_required_suites_is_incomplete() -> None:
    """Reproduction: a conformance-only TP8 baseline made the EP32+MegaMoE candidate PASS."""
    checks = {"answer_follows_reasoning[plain]": {"passed": 10, "failed": 0}}
    baseline = summary(suites=(), checks=checks)
    candidate = summary("ep32-megamoe", server_shape="ep32-megamoe", right=40, looping=54, checks=checks)
    result = judge(run(baseline), run(candidate), GateSettings())
    assert result.verdict == "INCOMPLETE" and result.fails()
    assert result.shape is not None and result.shape.missing_in_baseline == ("agentic_coding", "math")
    assert any("the baseline has no agentic_coding suite" in reason for reason in result.reasons)


def test_suite_scored_on_the_baseline_and_not_on_the_candidate_is_incomplete() -> None:
    """Reproduction: this was PASS when the candidate had conformance checks."""
    checks = {"answer_follows_reasoning[plain]": {"passed": 10, "failed": 0}}
    result = judge(run(summary(checks=checks)), run(summary(suites=(), checks=checks)), GateSettings())
    assert result.verdict == "INCOMPLETE"
    assert {reason.split(":")[1].strip() for reason in result.reasons} >= {"agentic_coding", "math"}


def test_a_subset_candidate_is_incomplete_unless_the_coverage_allows_it() -> None:
    """Reproduction: a `-k` run of 75 of 177 coding items was gated on the subset."""
    baseline = summary(items=177, right=120)
    candidate = drop_items(summary(items=177, right=120), "agentic_coding", range(75, 177))
    result = judge(run(baseline), run(candidate), GateSettings())
    assert result.verdict == "INCOMPLETE"
    assert result.coverage["agentic_coding"].compared == 75 and result.coverage["agentic_coding"].absent == 102
    assert any("the candidate scored 75 of the baseline's 177 items" in reason for reason in result.reasons)
    allowed = judge(run(baseline), run(candidate), GateSettings(min_coverage=0.4))
    assert allowed.verdict != "INCOMPLETE" and any("102 of the baseline's 177" in note for note in allowed.notes)


def test_zero_sample_and_absent_items_are_missing_not_dropped() -> None:
    """Reproduction: a MegaMoE-like candidate whose 64 looping items are unscored was
    INCONCLUSIVE, and 100 of 113 items was a PASS with only a note."""
    baseline = summary(items=113, right=77)
    unscored = drop_items(summary(items=113, right=77), "agentic_coding", range(49, 113), keep_entry=True)
    result = judge(run(baseline), run(unscored), GateSettings())
    assert result.verdict == "INCOMPLETE" and result.coverage["agentic_coding"].unscored == 64
    absent = drop_items(summary(items=2000, right=1800), "agentic_coding", range(100, 113))
    result = judge(run(summary(items=2000, right=1800)), run(absent), GateSettings())
    assert result.verdict == "INCOMPLETE" and result.coverage["agentic_coding"].absent == 13


def test_an_unanswered_item_is_a_loss_not_a_missing_item() -> None:
    baseline = summary(items=113, right=77)
    candidate = summary(items=113, right=48, looping=57)
    for entry in list(candidate["suites"]["agentic_coding"]["scores"].values())[56:]:
        entry["no_answer"] = 1
    result = judge(run(baseline), run(candidate), GateSettings())
    assert result.verdict == "FAIL" and result.coverage["agentic_coding"].share == 1.0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"samples": "one"}, "samples must be an integer >= 0, got 'one'"),
        ({"correct": None}, "correct must be a number between 0 and samples (1), got None"),
        ({"correct": 2.0}, "correct must be a number between 0 and samples (1), got 2.0"),
        ({"samples": -1}, "samples must be an integer >= 0, got -1"),
        ({"looping": None}, "looping must be an integer between 0 and samples (1), got None"),
    ],
)
def test_malformed_item_totals_are_rejected(change: dict[str, Any], message: str) -> None:
    """Reproduction: these crashed with a traceback, or were accepted."""
    data = summary()
    data["suites"]["agentic_coding"]["scores"]["item-3"] = {
        **data["suites"]["agentic_coding"]["scores"]["item-3"],
        **change,
    }
    with pytest.raises(SchemaError, match=re.escape(message)):
        validate_summary(data, "s.json")


def test_one_missing_looping_key_is_rejected_not_a_switched_off_comparison() -> None:
    data = summary()
    del data["suites"]["agentic_coding"]["scores"]["item-7"]["looping"]
    with pytest.raises(SchemaError, match="suite 'agentic_coding' item 'item-7': has no looping"):
        validate_summary(data, "s.json")


def test_a_summary_without_status_is_not_complete() -> None:
    data = summary()
    del data["status"]
    with pytest.raises(SchemaError, match="has no status"):
        validate_summary(data, "s.json")


def write_summary(path: Path, data: dict[str, Any]) -> str:
    return write_run(path, data)


def test_compare_rejects_a_malformed_summary_with_one_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = summary()
    broken["suites"]["agentic_coding"]["scores"]["item-0"]["samples"] = "one"
    baseline = write_summary(tmp_path / "base", summary())
    candidate = write_summary(tmp_path / "cand", broken)
    assert cli_main(["compare", baseline, candidate]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "samples must be an integer" in error and "Traceback" not in error


def test_compare_checks_the_dataset_hashes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Reproduction: `compare` gated a candidate on another dataset, PASS, exit 0."""
    base_data, cand_data = summary(items=2000, right=1800), summary(items=2000, right=1800)
    base_data["datasets"] = {"agentic_coding": {"items": [], "sources": {"humaneval": "a" * 64}}}
    cand_data["datasets"] = {"agentic_coding": {"items": [], "sources": {"humaneval": "b" * 64}}}
    code = cli_main(["compare", write_summary(tmp_path / "b", base_data), write_summary(tmp_path / "c", cand_data)])
    assert code == 2
    assert "dataset humaneval has changed since the baseline" in capsys.readouterr().err


def test_fail_side_is_holm_adjusted_over_the_whole_gate() -> None:
    """Ten suites each with a looping rise at p between alpha/10 and alpha: alone each would
    FAIL; over the gate none may."""
    suites = tuple(f"suite{index}" for index in range(10))
    baseline = summary(items=113, suites=suites)
    candidate = summary(items=113, suites=suites, looping=5)
    result = judge(run(baseline), run(candidate), GateSettings())
    rates = [result.rates[suite]["looping"] for suite in suites]
    assert all(0.005 < rate.p_value <= 0.05 for rate in rates)
    assert all(rate.verdict != "FAIL" and rate.adjusted_p_value > 0.05 for rate in rates)
    assert result.verdict != "FAIL"


def test_same_width_on_other_hardware_or_stack_is_a_changed_deployment() -> None:
    """Reproduction: B300 and MI355X TP8, or two SGLang versions, compared as the same shape."""
    baseline, candidate = summary(items=2000, right=1800), summary(items=2000, right=1800, suites=("math",))
    baseline["server_info"]["get_server_info"]["version"] = "0.5.23"
    candidate["server_info"]["get_server_info"]["version"] = "0.5.24"
    candidate["launch"] = {"args": {}, "env": {"SGLANG_K3_KDA_FUSED_BACKEND": "triton"}, "hardware": "MI355X"}
    result = judge(run(baseline), run(candidate), GateSettings())
    assert result.shape is not None and result.shape.missing_suites == ("agentic_coding",)
    (difference,) = result.shape.differences
    assert 'get_server_info.version: "0.5.23" → "0.5.24"' in difference
    assert 'launch.env.SGLANG_K3_KDA_FUSED_BACKEND: (not recorded) → "triton"' in difference
    assert "launch.hardware" in difference


# --- model text is escaped where it leaves (issue 25, finding 4) ---------------------------

HOSTILE = (
    "\x1b[2J\x1b[31mPASS\x1b[0m\rgate: PASS\n## k3conformance gate: **PASS**\n"
    "![x](https://attacker.example/p.png) [docs](javascript:alert(1)) <img src=x> a | b `code` \u202eevil"
)


def test_model_text_in_the_reports_is_escaped() -> None:
    before = {"a[plain]": {"passed": 4, "failed": 0}}
    after = {"a[plain]": {"passed": 1, "failed": 3, "excerpts": {"api": HOSTILE}}}
    result = judge(run(summary(checks=before)), run(summary(checks=after)), GateSettings())
    assert result.regressions and result.regressions[0].excerpt == HOSTILE
    text = text_report(result)
    assert not any(character in line for line in text for character in "\x1b\r\n\u202e")
    assert any("\\x1b[2J" in line and "\\r" in line for line in text)
    markdown = markdown_report(result)
    regression = next(line for line in markdown.splitlines() if line.startswith("- reasoning/"))
    # One line, nothing Markdown would render: no image, link, HTML, heading, code or cell break.
    assert "\x1b" not in markdown and "\r" not in markdown and "\u202e" not in markdown
    for unescaped in (
        r"(?<!\\)!",
        r"(?<!\\)[\[\]]",
        r"(?<!\\)<",
        r"(?<!\\)#",
        r"(?<!\\)\*",
        r"(?<!\\)`",
        r" (?<!\\)\| ",
        "https:",
    ):
        assert not re.search(unescaped, regression.removeprefix("- reasoning/")), unescaped
    assert markdown.count("\n## ") == 0 and markdown.startswith("## k3conformance gate: **FAIL**")
