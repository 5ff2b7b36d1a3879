"""What the gate takes as evidence (issue 21): fail-safe exit statuses, sane options, the policy
printed, the baseline's conformance suites and settings, malformed summaries, baseline admission.
Each test names the reproduction it turned from PASS or exit 0 into FAIL, INCOMPLETE or a refusal."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
from gate_mutations import CONFORMANCE, deepep_case, megamoe_case
from stored_runs import EXCHANGES_OF, rewrite_records, write_run

from k3conformance.cli import main as cli_main
from k3conformance.gate.evidence import judged_on_records
from k3conformance.gate.report import markdown_report, text_report
from k3conformance.gate.settings import GateSettings
from k3conformance.gate.verdict import judge
from k3conformance.options import alpha, margin_points, rate, share, suite_margins
from k3conformance.runs.schema import SchemaError, validate_summary
from k3conformance.runs.stored import BaselineError, StoredRun, load_run


def stored(data: dict[str, Any], path: Path | None = None) -> StoredRun:
    return StoredRun(validate_summary(data, "test"), path)


def write(directory: Path, data: dict[str, Any]) -> str:
    return write_run(directory, data)


def unchanged_pair() -> tuple[dict[str, Any], dict[str, Any]]:
    """The DeepEP case's baseline against itself under another run id: no loss anywhere, so
    INCONCLUSIVE at these sizes."""
    baseline, _ = deepep_case()
    candidate = json.loads(json.dumps(baseline))
    candidate.update(run_id="run-again", started_at="2026-12-01T05:00:00+00:00", baseline=False)
    return baseline, candidate


# Reproduction 10 and 8: fail safe by default, sane options, the policy in the reports.


def test_inconclusive_fails_by_default_and_warn_is_an_opt_in_the_verdict_line_names() -> None:
    """Reproduction 10: INCONCLUSIVE exited 0 by default, so a DeepEP-sized loss shipped green."""
    baseline, candidate = unchanged_pair()
    strict = judge(stored(baseline), stored(candidate), GateSettings())
    assert strict.verdict == "INCONCLUSIVE" and strict.fails()
    assert "strict mode: exits non-zero unless PASS" in text_report(strict)[0]
    warn = judge(stored(baseline), stored(candidate), GateSettings(gate="warn"))
    assert not warn.fails()
    assert "warn mode, opted into with --k3-gate warn: INCONCLUSIVE exits 0" in text_report(warn)[0]


def test_compare_exits_1_on_inconclusive_by_default(tmp_path: Path) -> None:
    baseline, candidate = unchanged_pair()
    arguments = ["compare", write(tmp_path / "b", baseline), write(tmp_path / "c", candidate)]
    assert cli_main(arguments) == 1
    assert cli_main([*arguments, "--gate", "warn"]) == 0


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        (margin_points, "40"),
        (margin_points, "10.5"),
        (suite_margins, "coding=40"),
        (alpha, "0.45"),
        (alpha, "0.2"),
        (rate, "0.9"),
        (share, "0"),
        (share, "0.5"),
    ],
)
def test_gate_options_outside_sane_ranges_are_refused(parse: Any, text: str) -> None:
    """Reproduction 8: `--margin 40` passed a suite at −3.4 [−6.6, −1.6]; `--alpha 0.45` was accepted."""
    with pytest.raises(argparse.ArgumentTypeError):
        parse(text)


def test_compare_refuses_a_weak_option_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    baseline, candidate = deepep_case()
    with pytest.raises(SystemExit) as exit_info:
        cli_main(["compare", write(tmp_path / "b", baseline), write(tmp_path / "c", candidate), "--margin", "40"])
    assert exit_info.value.code == 2
    assert "a wider margin lets a real regression pass" in capsys.readouterr().err


def test_the_policy_in_force_is_printed_in_the_text_and_markdown_reports_and_stored() -> None:
    """Reproduction 8: neither report printed the margin or α in force."""
    baseline, candidate = deepep_case()
    settings = GateSettings(margin=2.0, margins=(("math", 1.0),), alpha=0.025, allow_differences=("seed",))
    result = judge(stored(baseline), stored(candidate), settings)
    policy = (
        "policy: margin 2 pts, math 1, one-sided α 0.025, looping floor 2%, truncation floor 5%, minimum coverage "
        "100%, differences allowed: seed, strict mode: exits non-zero unless PASS; differs from the default policy: "
        "margin 2 (default 3); alpha 0.025 (default 0.05); margin of math 1 (default 3); differences allowed: seed "
        "(weaker policy)"
    )
    assert text_report(result)[1].strip() == policy
    assert policy in markdown_report(result)
    assert result.to_dict()["policy"]["margin"] == 2.0 and result.to_dict()["policy"]["alpha"] == 0.025


# Reproduction 4: conformance evidence left out.


def test_a_conformance_suite_of_the_baseline_missing_from_the_candidate_is_incomplete() -> None:
    """Reproduction 4: `--ignore=suites/test_tool_calls.py` on a profile failing six tool-call checks
    was INCONCLUSIVE, exit 0, with no mention of tool_calls."""
    baseline, candidate = megamoe_case()
    del candidate["suites"][CONFORMANCE]
    result = judge(stored(baseline), stored(candidate), GateSettings())
    assert any(
        reason.startswith("INCOMPLETE: tool_calls: the baseline ran its 7 checks and the candidate ran none")
        for reason in result.reasons
    )


def test_a_renamed_conformance_suite_is_incomplete() -> None:
    baseline, candidate = megamoe_case()
    candidate["suites"]["tool_calls_v2"] = candidate["suites"].pop(CONFORMANCE)
    result = judge(stored(baseline), stored(candidate), GateSettings())
    assert any("tool_calls: the baseline ran its 7 checks" in reason for reason in result.reasons)


def test_a_check_that_errors_on_every_item_is_not_nothing() -> None:
    """Reproduction 4: a check that errors on every item was not a regression, nor anything."""
    baseline, candidate = deepep_case()
    candidate["suites"][CONFORMANCE]["checks"]["check_a"].update(passed=0, failed=0, errors=4)
    del candidate["suites"][CONFORMANCE]["checks"]["check_b"]
    result = judge(stored(baseline), stored(candidate), GateSettings())
    texts = [finding.text for finding in result.findings if finding.verdict == "INCOMPLETE"]
    assert (
        "tool_calls/check_a passes on the baseline and neither passed nor failed on the candidate (4 errors, 0 infrastructure errors)"
        in texts
    )
    assert "tool_calls/check_b passes on the baseline and did not run on the candidate" in texts


# Partial baselines.


def test_candidate_items_the_baseline_has_no_score_for_make_the_baseline_partial() -> None:
    baseline, candidate = deepep_case()
    for item in [f"code-{i}" for i in range(0, 300, 5)]:
        del baseline["suites"]["coding"]["scores"][item]
    result = judge(stored(baseline), stored(candidate), GateSettings())
    assert result.verdict == "INCOMPLETE"
    assert any("coding: the candidate scored 60 items the baseline has no score for" in r for r in result.reasons)


def test_a_suite_whose_items_the_baseline_selected_and_did_not_score_is_incomplete() -> None:
    baseline, candidate = deepep_case()
    baseline["suites"]["coding"]["scores"] = {}
    result = judge(stored(baseline), stored(candidate), GateSettings())
    assert any("coding: the baseline selected its items and scored none" in reason for reason in result.reasons)


# Reproduction 7: settings and the model.


@pytest.mark.parametrize(
    ("name", "value"),
    [("reasoning_effort", "low"), ("think_mode", "kimi"), ("seed", 7), ("model", "other/model"), ("agent_turns", 5)],
)
def test_a_setting_that_differs_from_the_baseline_is_incomplete_unless_declared(name: str, value: Any) -> None:
    """Reproduction 7: effort low, think mode kimi, seed 7 or another model id: INCONCLUSIVE, exit 0, no mention."""
    baseline, candidate = unchanged_pair()
    if name == "model":
        candidate["model"] = value
    else:
        candidate["settings"][name] = value
    result = judge(stored(baseline), stored(candidate), GateSettings())
    assert result.verdict == "INCOMPLETE"
    assert any(f"the candidate ran under other settings than the baseline ({name}:" in r for r in result.reasons)
    declared = judge(stored(baseline), stored(candidate), GateSettings(allow_differences=(name,)))
    assert declared.verdict == "INCONCLUSIVE"
    assert any("allowed on purpose (--k3-allow-differences)" in note for note in declared.notes)


def test_a_candidate_without_recorded_settings_is_incomplete() -> None:
    baseline, candidate = unchanged_pair()
    del candidate["settings"]
    result = judge(stored(baseline), stored(candidate), GateSettings())
    assert any("settings: the candidate run recorded none" in reason for reason in result.reasons)


# Reproduction 11: malformed summaries.


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda data: data.pop("shape"), "shape must be a non-empty string"),
        (lambda data: data.pop("run_id"), "run_id must be a non-empty string"),
        (lambda data: data["datasets"]["coding"].update(sources=["fixture:coding"]), "datasets must map suites"),
        (
            lambda data: data["suites"][CONFORMANCE]["checks"]["check_a"].update(excerpts=["x"]),
            "has unreadable check counts",
        ),
        (lambda data: data.update(server_info=["x"]), "server_info must be an object"),
    ],
)
def test_malformed_summaries_are_one_message_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Any, message: str
) -> None:
    """Reproduction 11: each of these was a traceback, exit 1."""
    baseline, candidate = deepep_case()
    edit(candidate)
    with pytest.raises(SchemaError, match=message):
        validate_summary(candidate, "s.json")
    assert cli_main(["compare", write(tmp_path / "b", baseline), write(tmp_path / "c", candidate)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and message in error and "Traceback" not in error


# Reproductions 5 and 10: what may serve as a baseline.


def test_compare_refuses_the_baseline_as_its_own_candidate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Reproduction 10: `compare B B` and a relabelled copy of the baseline were accepted; issue 35: so
    was a copy with a new run id and its start moved by 0.9 s. The copy's exchanges give it away,
    whatever its labels say."""
    baseline, _ = deepep_case()
    path = write(tmp_path / "b", baseline)
    assert cli_main(["compare", path, path]) == 2
    assert "is the baseline itself (tp8/run-base: the same run id)" in capsys.readouterr().err
    copy = dict(baseline, run_id="run-copy", shape="ep32-deepep", started_at="2026-12-01T01:00:00.900000+00:00")
    assert cli_main(["compare", path, write(tmp_path / "c", {**copy, EXCHANGES_OF: "run-base"})]) == 2
    assert (
        "is a copy of the baseline tp8/run-base: 401 of its exchanges carry the baseline's" in capsys.readouterr().err
    )


def test_a_stored_subset_or_contradicted_run_is_no_baseline(tmp_path: Path) -> None:
    """Reproduction 5: a `--k3-limit 2` run and a MegaMoE run labelled tp8 became the tp8 baseline."""
    baseline, _ = deepep_case()
    subset = dict(baseline, selection={"keyword": None, "markers": None, "limit": 2, "deselected": 9, "subset": True})
    with pytest.raises(BaselineError, match="ran a subset of the items"):
        load_run(write(tmp_path / "subset", subset), tmp_path)
    declared = dict(subset, subset_declared=True)
    assert load_run(write(tmp_path / "declared", declared), tmp_path).summary["subset_declared"]
    contradicted = dict(baseline, shape_settings={"contradictions": ["--k3-shape tp8 means tp_size=8"]})
    with pytest.raises(BaselineError, match="which its server's own arguments contradict"):
        load_run(write(tmp_path / "contradicted", contradicted), tmp_path)


def test_a_gate_under_a_weaker_policy_than_the_baselines_says_so() -> None:
    """Issue 21: the policy is stored with the baseline, and a candidate judged under a weaker one says so."""
    baseline, candidate = unchanged_pair()
    baseline["policy"] = GateSettings().policy()
    result = judge(stored(baseline), stored(candidate), GateSettings(margin=5.0, alpha=0.1, gate="warn"))
    assert (
        "judged under a weaker policy than the baseline's run: margin 5 (the baseline's 3), alpha 0.1 (the "
        "baseline's 0.05), warn mode (the baseline's strict)"
    ) in result.notes
    assert not any("weaker policy" in note for note in judge(stored(baseline), stored(candidate), GateSettings()).notes)


def test_a_baseline_stored_before_subsets_were_declared_is_judged_by_its_named_selection(tmp_path: Path) -> None:
    """Before issue 21 every default run recorded subset: true (vendor-only checks deselected)."""
    baseline, _ = deepep_case()
    old = dict(baseline, selection={"keyword": None, "markers": None, "limit": None, "deselected": 9, "subset": True})
    assert load_run(write(tmp_path / "old", old), tmp_path).summary["run_id"] == "run-base"
    limited = dict(old, selection={**old["selection"], "limit": 2})
    with pytest.raises(BaselineError, match="ran a subset of the items"):
        load_run(write(tmp_path / "limited", limited), tmp_path)


# The records are the evidence, under the identity sealed when the run started (gate/evidence.py,
# gate/identity.py): reproductions 3 and 6, and the summary edits the mutation harness found.


def judged_from_disk(
    tmp_path: Path, baseline: dict[str, Any], candidate: dict[str, Any], recorded: dict[str, Any] | None = None
) -> Any:
    """The gate on the two runs written to disk, the candidate's records and identity those of
    `recorded` (default: its summary's)."""
    base_dir = Path(write_run(tmp_path / "base", baseline))
    cand_dir = Path(write_run(tmp_path / "cand", candidate, recorded))
    return judge(load_run(str(base_dir), tmp_path), load_run(str(cand_dir), tmp_path, baseline=False), GateSettings())


def test_a_summary_given_the_baseline_scores_is_judged_on_its_records(tmp_path: Path) -> None:
    """Reproduction 3: copying the baseline's per-item scores into a FAILing MegaMoE summary gave
    INCONCLUSIVE, exit 0, while its records still held every looping answer."""
    baseline, candidate = megamoe_case()
    forged = json.loads(json.dumps(candidate))
    forged["suites"]["agentic_coding"] = json.loads(json.dumps(baseline["suites"]["agentic_coding"]))
    result = judged_from_disk(tmp_path, baseline, forged, recorded=candidate)
    assert result.verdict == "FAIL" and result.fails()
    assert result.accuracy["agentic_coding"].verdict == "FAIL"
    (problem,) = [reason for reason in result.reasons if "disagrees with its records" in reason]
    assert (
        "agentic_coding/task-25: the summary says samples 1, correct 1, the records samples 1, truncated 1, " in problem
    )


def test_a_summary_that_agrees_with_its_records_is_judged_as_it_is(tmp_path: Path) -> None:
    baseline, candidate = megamoe_case()
    result = judged_from_disk(tmp_path, baseline, candidate)
    assert result.verdict == "FAIL"
    assert not [reason for reason in result.reasons if "records" in reason or "identity" in reason]


def test_a_complete_run_without_records_or_identity_is_incomplete(tmp_path: Path) -> None:
    baseline, candidate = unchanged_pair()
    cand_dir = Path(write_run(tmp_path / "cand", candidate))
    (cand_dir / "records-main.jsonl").unlink()
    (cand_dir / "identity.json").unlink()
    base_dir = write_run(tmp_path / "base", baseline)
    result = judge(load_run(base_dir, tmp_path), load_run(str(cand_dir), tmp_path, baseline=False), GateSettings())
    assert result.verdict == "INCOMPLETE"
    reasons = " ".join(result.reasons)
    assert "run-again: no records (records-*.jsonl or .jsonl.zst) next to its summary" in reasons
    assert "run-again: no sealed identity (identity.json)" in reasons


def test_each_tests_last_outcome_counts(tmp_path: Path) -> None:
    """A resumed run wrote a test's outcome once per session: the later one is the evidence."""
    baseline, _ = unchanged_pair()
    run_dir = Path(write_run(tmp_path / "run", baseline))
    records = [json.loads(line) for line in (run_dir / "records-main.jsonl").read_text().splitlines()]
    first = next(record for record in records if record["kind"] == "outcome")
    earlier = {**first, "written_at": "2026-11-30T00:00:00.000+00:00", "score": {**first["score"], "correct": 0.0}}
    rewrite_records(run_dir, [earlier, *records])
    assert judged_on_records(load_run(str(run_dir), tmp_path)).problems == ()
    later = {**first, "written_at": "2026-12-02T00:00:00.000+00:00", "score": {**first["score"], "correct": 0.0}}
    rewrite_records(run_dir, [earlier, *records, later])
    (problem,) = judged_on_records(load_run(str(run_dir), tmp_path)).problems
    total = first["score"]["samples"]
    assert (
        f"{first['suite']}/{first['item']}: the summary says samples {total}, correct {total}, the records samples {total})"
        in problem
    )


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda summary: summary.update(shape="tp8"), "shape: ep32-deepep → tp8"),
        (lambda summary: summary.update(model="some/other"), "model: moonshotai/Kimi-K3 → some/other"),
        (lambda summary: summary["settings"].update(seed=7), "settings.seed: 1234 → 7"),
        (lambda summary: summary.update(server_info={}), "deployment: "),
    ],
    ids=["shape", "model", "seed", "server"],
)
def test_a_summary_relabelled_after_the_run_disagrees_with_its_sealed_identity(
    tmp_path: Path, edit: Any, named: str
) -> None:
    baseline, candidate = deepep_case()
    relabelled = json.loads(json.dumps(candidate))
    edit(relabelled)
    result = judged_from_disk(tmp_path, baseline, relabelled, recorded=candidate)
    assert result.fails()
    (problem,) = [reason for reason in result.reasons if "identity sealed" in reason]
    assert named in problem


# Reproduction 9: the items asked, hashed item by item.


def with_item_hashes(summary: dict[str, Any], edited: str | None = None) -> dict[str, Any]:
    """The summary with a content hash per item of each scored suite; `edited` hashed otherwise."""
    summary = json.loads(json.dumps(summary))
    for entry in summary["datasets"].values():
        entry["item_sha256"] = {item: f"{item}-{'edited' if item == edited else 'v1'}" for item in entry["items"]}
    return summary


def test_an_edited_task_is_incomplete_naming_it() -> None:
    """An edited agentic task prompt passed pytest's up-front check with INCONCLUSIVE, exit 0."""
    baseline, candidate = unchanged_pair()
    result = judge(
        stored(with_item_hashes(baseline)), stored(with_item_hashes(candidate, "task-7")), GateSettings(gate="warn")
    )
    assert result.verdict == "INCOMPLETE" and result.fails()
    assert (
        "INCOMPLETE: agentic_coding: 1 items ask something else than on the baseline (such as task-7"
        in (result.reasons[0])
    )


def test_a_suite_without_a_recorded_dataset_is_incomplete() -> None:
    baseline, candidate = unchanged_pair()
    del candidate["datasets"]["coding"]
    result = judge(stored(baseline), stored(candidate), GateSettings(gate="warn"))
    assert result.verdict == "INCOMPLETE"
    assert "coding: the candidate run records no dataset for the suite" in " ".join(result.reasons)


def test_a_dataset_without_a_hash_needs_item_hashes() -> None:
    """The long-context prompts carried an empty hash: their items' hashes stand in for it."""
    baseline, candidate = unchanged_pair()
    for summary in (baseline, candidate):
        summary["datasets"]["math"]["sources"] = {"synthetic needles (7)": ""}
    unhashed = judge(stored(baseline), stored(candidate), GateSettings(gate="warn"))
    assert "math: a dataset without a content hash and no item hashes" in " ".join(unhashed.reasons)
    hashed = judge(stored(with_item_hashes(baseline)), stored(with_item_hashes(candidate)), GateSettings(gate="warn"))
    assert hashed.verdict == "INCONCLUSIVE" and not [reason for reason in hashed.reasons if "hash" in reason]
