"""The gate mutation harness (issue 21): start from a candidate that FAILs against its baseline,
do to the evidence what a user under deadline pressure or a broken file does, and see whether
the gate still says FAIL, or INCOMPLETE with a reason, or refuses the input, with a non-zero exit.

Every mutation goes through `k3conformance compare` on files written to disk (schema, loading,
dataset check, judge, replay, exit status): the path a CI job takes. Used by
tests/unit/gate/test_mutations.py and benchmarks/bench_gate_mutations.py (which prints the table).

The two starting points are synthetic summaries, built here and checked to FAIL on the full
evidence: the reference's MegaMoE case (agentic coding 65% → 42%, 21 of 60 tasks looping, six
tool-call checks newly failing) and a DeepEP-sized loss (5 points) on a coding suite sampled 4
times per item.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from stored_runs import EXCHANGES_OF, write_records

from k3conformance.cli import main as cli_main
from k3conformance.deployment.cookbook import get_shape
from k3conformance.deployment.shapes import server_args

Summary = dict[str, Any]
# (baseline, candidate, extra compare arguments) → the same, mutated.
Evidence = tuple[Summary, Summary, list[str]]

SETTINGS: dict[str, Any] = {
    "think_mode": "opensource",
    "reasoning_effort": "max",
    "temperature": 1.0,
    "top_p": 0.95,
    "seed": 1234,
    "samples": 1,
    "limit": None,
    "max_tokens": None,
    "agent_turns": 40,
    "agent_tokens": 262144,
    "agent_wall_time": 3600.0,
    "agent_tools": "all",
    "agent_tool_choice": "auto",
    "agent_thinking": True,
    "context_lengths": [8000, 32000, 128000],
    "looks": 5,
    "max_items": None,
    "sample_rounds": [2, 4, 8],
}
CONFORMANCE = "tool_calls"


def _item(samples: int, correct: float, looping: bool = False) -> dict[str, Any]:
    return {
        "samples": samples,
        "correct": float(correct),
        "no_answer": 0,
        "truncated": samples if looping else 0,
        "looping": samples if looping else 0,
    }


def _check(passed: int, failed: int) -> dict[str, Any]:
    excerpts = {"a": "expected a tool call; got: text"} if failed else {}
    return {"passed": passed, "failed": failed, "infra_errors": 0, "errors": 0, "layers": {}, "excerpts": excerpts}


def _shape(name: str) -> Any:
    shape = get_shape(name)
    assert shape is not None, name
    return shape


def _summary(
    run_id: str, shape: str, server_shape: str, suites: dict[str, dict[str, Any]], *, baseline: bool
) -> Summary:
    datasets = {
        name: {"items": sorted(suite["scores"]), "sources": {f"fixture:{name}": f"sha-{name}"}}
        for name, suite in suites.items()
        if suite["scores"]
    }
    datasets[CONFORMANCE] = {"items": ["weather"], "sources": {"fixtures/tool_calls.json": "sha-tools"}}
    return {
        "run_id": run_id,
        "shape": shape,
        "status": "complete",
        "baseline": baseline,
        "selection": {"keyword": None, "markers": None, "limit": None, "deselected": 0, "subset": False},
        "simulator": False,
        "endpoint": "http://k3:30000/v1",
        "reference_profile": None,
        "model": "moonshotai/Kimi-K3",
        "served_models": ["moonshotai/Kimi-K3"],
        "server_info": {"get_server_info": server_args(_shape(server_shape))},
        "shape_settings": {"settings": None, "described": None, "source": "server", "contradictions": []},
        "settings": dict(SETTINGS, samples=4 if "coding" in suites else 1),
        "started_at": f"2026-12-01T0{1 if baseline else 2}:00:00+00:00",
        "finished_at": f"2026-12-01T0{1 if baseline else 2}:30:00+00:00",
        "sessions": [],
        "requests": {},
        "suites": suites,
        "datasets": datasets,
        "sequential": None,
        "plugin_version": "test",
        "python": "3",
        "pytest": "8",
        "platform": "linux",
    }


def _suite(scores: dict[str, dict[str, Any]], checks: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"scores": scores, "checks": checks or {}}


def _conformance(failing: bool) -> dict[str, Any]:
    checks = {f"check_{letter}": _check(0, 4) if failing else _check(4, 0) for letter in "abcdef"}
    checks["check_g"] = _check(4, 0)
    return _suite({}, checks)


def megamoe_case() -> tuple[Summary, Summary]:
    """Agentic coding 39 → 25 of 60 right, 21 tasks looping (14 of them right on the baseline),
    math unchanged, six tool-call checks newly failing; the candidate's deployment is EP32 MegaMoE."""
    agentic_before = {f"task-{i}": _item(1, i < 39) for i in range(60)}
    agentic_after = {f"task-{i}": _item(1, i < 25, looping=25 <= i < 46) for i in range(60)}
    math = {f"math-{i}": _item(1, i < 35) for i in range(41)}
    baseline = _summary(
        "run-base",
        "tp8",
        "tp8",
        {"agentic_coding": _suite(agentic_before), "math": _suite(math), CONFORMANCE: _conformance(False)},
        baseline=True,
    )
    candidate = _summary(
        "run-megamoe",
        "ep32-megamoe",
        "ep32-megamoe",
        {"agentic_coding": _suite(agentic_after), "math": _suite(dict(math)), CONFORMANCE: _conformance(True)},
        baseline=False,
    )
    return baseline, candidate


def deepep_case() -> tuple[Summary, Summary]:
    """A 5-point loss on a coding suite of 300 items sampled 4 times each (3 of 4 right on the
    baseline everywhere; 2 of 4 on every fifth item on the candidate), nothing else changed; the
    candidate's deployment is EP32 DeepEP."""
    coding_before = {f"code-{i}": _item(4, 3) for i in range(300)}
    coding_after = {f"code-{i}": _item(4, 2 if i % 5 == 0 else 3) for i in range(300)}
    agentic = {f"task-{i}": _item(1, i < 39) for i in range(60)}
    math = {f"math-{i}": _item(1, i < 35) for i in range(41)}

    def suites(coding: dict[str, Any]) -> dict[str, dict[str, Any]]:
        return {
            "agentic_coding": _suite(dict(agentic)),
            "coding": _suite(coding),
            "math": _suite(dict(math)),
            CONFORMANCE: _conformance(False),
        }

    baseline = _summary("run-base", "tp8", "tp8", suites(coding_before), baseline=True)
    candidate = _summary("run-deepep", "ep32-deepep", "ep32-deepep", suites(coding_after), baseline=False)
    return baseline, candidate


def _on_llamacpp(summary: Summary, args: dict[str, str]) -> Summary:
    """The summary as a run against llama.cpp records it: /props (no SGLang arguments), the
    launch settings of --k3-server-args, a model that is not Kimi."""
    summary["server_info"] = {
        "props": {
            "model_path": "/models/SmolLM2-135M-Instruct.Q4_1.gguf",
            "model_alias": "smollm2-135m-instruct",
            "total_slots": 2,
            "media_marker": f"<__media_{summary['run_id']}__>",
        }
    }
    summary["launch"] = {"args": args, "env": {}}
    summary["model"] = "smollm2-135m-instruct"
    summary["served_models"] = ["smollm2-135m-instruct"]
    summary["settings"]["samples"] = 1
    return summary


def llamacpp_case() -> tuple[Summary, Summary]:
    """The real engine's clear regression (docs/real-engine.md): the small-model suite on
    llama.cpp, 20 → 5 of 48 right with RoPE frequency scale 0.5, tool-call checks unchanged.
    Both runs are llama.cpp deployments known whole, so the shape policy requires the suite the
    baseline scored, not Kimi K3's two (issue 22): the one FAIL source is the accuracy loss."""
    before = {f"small-{i:03d}": _item(1, i < 20) for i in range(48)}
    after = {f"small-{i:03d}": _item(1, i < 5) for i in range(48)}
    baseline = _summary(
        "run-base",
        "llamacpp-default",
        "tp8",
        {"small_model": _suite(before), CONFORMANCE: _conformance(False)},
        baseline=True,
    )
    candidate = _summary(
        "run-rope",
        "rope-scale-half",
        "tp8",
        {"small_model": _suite(after), CONFORMANCE: _conformance(False)},
        baseline=False,
    )
    return _on_llamacpp(baseline, {}), _on_llamacpp(candidate, {"rope_freq_scale": "0.5"})


CASES: dict[str, Callable[[], tuple[Summary, Summary]]] = {
    "megamoe": megamoe_case,
    "deepep-4-samples": deepep_case,
    "llamacpp-rope": llamacpp_case,
}
# The accuracy suite whose loss FAILs each case.
FAILING_SUITE = {"megamoe": "agentic_coding", "deepep-4-samples": "coding", "llamacpp-rope": "small_model"}


# ---------------------------------------------------------------------------
# Mutations: each a pure edit of (baseline, candidate, compare arguments).


@dataclass(frozen=True)
class Mutation:
    name: str
    apply: Callable[[str, Evidence], Evidence]
    # Writes a file that is no summary at all: only applied last in a pair.
    breaks_the_file: bool = False
    # Takes evidence away (items, suites, checks, baseline scores) or forges it: the pairs of these
    # are the ones the unit test tries on every run (the benchmark tries every pair).
    removes: bool = False
    # Edits the summary file after the run: its records still hold what the run did. Otherwise
    # the run itself did it (ran fewer items, another setting): summary and records agree.
    summary_only: bool = False
    # Edits or removes the records file after the run, the summary untouched.
    records_only: bool = False
    # A gate option inside its allowed range that may make a verdict easier: it may change the verdict
    # when the report marks it a weaker policy, and nothing done to the evidence with it may do better
    # than the verdict on the whole evidence under the same policy.
    policy: bool = False


def _lost(case: str, baseline: Summary, candidate: Summary) -> list[str]:
    """The failing suite's items the candidate did worse on, or looped on."""
    suite = FAILING_SUITE[case]
    before, after = baseline["suites"][suite]["scores"], candidate["suites"].get(suite, {}).get("scores", {})
    return [
        item
        for item, entry in after.items()
        if (
            item in before
            and (
                entry["correct"] / max(entry["samples"], 1) < before[item]["correct"] / max(before[item]["samples"], 1)
            )
        )
        or entry["looping"]
    ]


def _copy(evidence: Any) -> Any:
    # A JSON round trip: what is written to disk anyway, and much faster than deepcopy here.
    return json.loads(json.dumps(evidence))


def _on_candidate(edit: Callable[[str, Summary, Summary], None]) -> Callable[[str, Evidence], Evidence]:
    def apply(case: str, evidence: Evidence) -> Evidence:
        baseline, candidate, arguments = _copy(list(evidence))
        try:
            edit(case, baseline, candidate)
        except (KeyError, TypeError, AttributeError):
            # What it edits is gone after the pair's first mutation (a suite dropped, say): the pair
            # is the first mutation alone.
            return evidence
        return baseline, candidate, arguments

    return apply


def _with_arguments(*extra: str) -> Callable[[str, Evidence], Evidence]:
    def apply(case: str, evidence: Evidence) -> Evidence:
        baseline, candidate, arguments = _copy(list(evidence))
        return baseline, candidate, [*arguments, *extra]

    return apply


def _drop_half(case: str, baseline: Summary, candidate: Summary) -> None:
    scores = candidate["suites"][FAILING_SUITE[case]]["scores"]
    for item in list(scores)[::2]:
        del scores[item]


def _drop_lost(case: str, baseline: Summary, candidate: Summary) -> None:
    for item in _lost(case, baseline, candidate):
        del candidate["suites"][FAILING_SUITE[case]]["scores"][item]


def _keep_first(count: int) -> Callable[[str, Summary, Summary], None]:
    def edit(case: str, baseline: Summary, candidate: Summary) -> None:
        for suite in candidate["suites"].values():
            suite["scores"] = dict(list(suite["scores"].items())[:count])

    return edit


def _zero_samples_lost(case: str, baseline: Summary, candidate: Summary) -> None:
    scores = candidate["suites"][FAILING_SUITE[case]]["scores"]
    for item in _lost(case, baseline, candidate):
        scores[item] = _item(0, 0)


def _drop_suite(case: str, baseline: Summary, candidate: Summary) -> None:
    del candidate["suites"][FAILING_SUITE[case]]


def _drop_accuracy_suites(case: str, baseline: Summary, candidate: Summary) -> None:
    for name in [name for name, suite in candidate["suites"].items() if suite["scores"]]:
        del candidate["suites"][name]


def _drop_conformance(case: str, baseline: Summary, candidate: Summary) -> None:
    del candidate["suites"][CONFORMANCE]


def _rename(suite_of: Callable[[str], str]) -> Callable[[str, Summary, Summary], None]:
    def edit(case: str, baseline: Summary, candidate: Summary) -> None:
        suite = suite_of(case)
        candidate["suites"][f"{suite}_v2"] = candidate["suites"].pop(suite)
        if suite in candidate["datasets"]:
            candidate["datasets"][f"{suite}_v2"] = candidate["datasets"].pop(suite)

    return edit


def _checks_error(case: str, baseline: Summary, candidate: Summary) -> None:
    for check in candidate["suites"][CONFORMANCE]["checks"].values():
        check.update(passed=0, failed=0, errors=4, excerpts={})


def _checks_dropped(case: str, baseline: Summary, candidate: Summary) -> None:
    checks = candidate["suites"][CONFORMANCE]["checks"]
    for name in [name for name, check in checks.items() if check["failed"] or name == "check_a"]:
        del checks[name]


def _duplicate_items(case: str, baseline: Summary, candidate: Summary) -> None:
    scores = candidate["suites"][FAILING_SUITE[case]]["scores"]
    for item, entry in list(scores.items())[:20]:
        scores[f"{item}-copy"] = dict(entry)


def _double_samples_of_good(case: str, baseline: Summary, candidate: Summary) -> None:
    """Duplicate ids merged into extra samples: every item the candidate did not lose counted twice."""
    scores = candidate["suites"][FAILING_SUITE[case]]["scores"]
    lost = set(_lost(case, baseline, candidate))
    for item, entry in scores.items():
        if item not in lost:
            entry.update(samples=entry["samples"] * 2, correct=entry["correct"] * 2)
            entry.update(truncated=entry["truncated"] * 2, looping=entry["looping"] * 2)


def _forge_correct(case: str, baseline: Summary, candidate: Summary) -> None:
    scores = candidate["suites"][FAILING_SUITE[case]]["scores"]
    for item in _lost(case, baseline, candidate):
        scores[item] = dict(baseline["suites"][FAILING_SUITE[case]]["scores"][item])


def _zero_events(case: str, baseline: Summary, candidate: Summary) -> None:
    for entry in candidate["suites"][FAILING_SUITE[case]]["scores"].values():
        entry.update(looping=0, truncated=0)


def _copy_baseline_scores(case: str, baseline: Summary, candidate: Summary) -> None:
    for name, suite in baseline["suites"].items():
        candidate["suites"][name] = _copy(suite)


def _status(status: str) -> Callable[[str, Summary, Summary], None]:
    def edit(case: str, baseline: Summary, candidate: Summary) -> None:
        candidate["status"] = status

    return edit


def _setting(name: str, value: Any) -> Callable[[str, Summary, Summary], None]:
    def edit(case: str, baseline: Summary, candidate: Summary) -> None:
        if name == "model":
            candidate["model"] = value
        else:
            candidate["settings"][name] = value

    return edit


def _drop_key(key: str) -> Callable[[str, Summary, Summary], None]:
    def edit(case: str, baseline: Summary, candidate: Summary) -> None:
        candidate.pop(key, None)

    return edit


def _relabel_as_baseline_shape(case: str, baseline: Summary, candidate: Summary) -> None:
    candidate["shape"] = baseline["shape"]
    candidate["server_info"] = _copy(baseline["server_info"])


def _relaunched(case: str, baseline: Summary, candidate: Summary) -> None:
    """The summary says the server was launched again: llama.cpp's media marker, drawn at every
    launch, is new (a field a resume may change, gate/policy.py's per-launch fields)."""
    props = candidate.setdefault("server_info", {}).setdefault("props", {})
    props["media_marker"] = "<__media_relaunched__>"


def _forged_sequential_pass(case: str, baseline: Summary, candidate: Summary) -> None:
    """A sequential block that stopped with PASS at look 1 after 8 items, its PASS bounds at −12
    (issue 21, reproduction 3)."""
    suite = FAILING_SUITE[case]
    order = sorted(baseline["suites"][suite]["scores"])
    kept = [item for item in order if item not in set(_lost(case, baseline, candidate))][:8]
    candidate["sequential"] = {
        suite: {
            "design": {
                "max_items": len(order),
                "sizes": [8, len(order)],
                "margin": 0.03,
                "alpha": 0.05,
                "fail_alpha": 0.045,
                "fail_bounds": [4.0, 1.7],
                "pass_bounds": [-12.0, -12.0],
            },
            "looks": [],
            "monitors": {},
            "stop": {"verdict": "PASS", "by": "look", "items": 8, "look": 1},
            "items": 8,
            "order": kept + [item for item in order if item not in kept],
            "order_seed": 1,
            "max_items": len(order),
            "samples_used": 8,
            "blocked_by": None,
            "stopped_early": True,
            "cancelled_items": [],
            "requests_saved": 0,
            "output_tokens_saved": 0,
        }
    }


def _baseline_drops_lost(case: str, baseline: Summary, candidate: Summary) -> None:
    for item in _lost(case, baseline, candidate):
        del baseline["suites"][FAILING_SUITE[case]]["scores"][item]


def _baseline_drops_suite_scores(case: str, baseline: Summary, candidate: Summary) -> None:
    baseline["suites"][FAILING_SUITE[case]]["scores"] = {}


def _baseline_drops_suite(case: str, baseline: Summary, candidate: Summary) -> None:
    del baseline["suites"][FAILING_SUITE[case]]
    baseline["datasets"].pop(FAILING_SUITE[case], None)


def _baseline_subset(case: str, baseline: Summary, candidate: Summary) -> None:
    baseline["selection"] = {"keyword": "math", "markers": None, "limit": None, "deselected": 50, "subset": True}


def _baseline_contradicted(case: str, baseline: Summary, candidate: Summary) -> None:
    baseline["shape_settings"]["contradictions"] = ["--k3-shape tp8 means tp_size=8, the server reports tp_size=32"]


def _baseline_status(case: str, baseline: Summary, candidate: Summary) -> None:
    baseline["status"] = "interrupted"


def _candidate_is_baseline(case: str, baseline: Summary, candidate: Summary) -> None:
    candidate.clear()
    candidate.update(_copy(baseline))


def _relabelled_copy(case: str, baseline: Summary, candidate: Summary) -> None:
    """The baseline folder copied, its shape relabelled in summary and identity, a new run id and
    its start moved by 0.9 s: its records are the baseline's exchanges (issue 35)."""
    _candidate_is_baseline(case, baseline, candidate)
    candidate.update(run_id="run-copy", shape="ep32-megamoe", baseline=False, started_at=_later(baseline, 0.9))
    candidate[EXCHANGES_OF] = baseline["run_id"]


def _later(summary: Summary, seconds: float) -> str:
    started = datetime.fromisoformat(summary["started_at"])
    return (started + timedelta(seconds=seconds)).isoformat()


def _replayed_exchanges(case: str, baseline: Summary, candidate: Summary) -> None:
    """The baseline's exchanges replayed as the candidate's run, chain and all recomputed under the
    candidate's own run id and labels: only the exchanges themselves give it away."""
    for name, suite in baseline["suites"].items():
        candidate["suites"][name] = _copy(suite)
    candidate[EXCHANGES_OF] = baseline["run_id"]


def _started_in_the_future(case: str, baseline: Summary, candidate: Summary) -> None:
    """A clock running a day ahead when the candidate started."""
    candidate["started_at"] = (datetime.now(timezone.utc) + timedelta(days=1)).isoformat()


def _layout(layout: str) -> Callable[[str, Summary, Summary], None]:
    def edit(case: str, baseline: Summary, candidate: Summary) -> None:
        candidate[LAYOUT] = layout

    return edit


def _malformed(edit: Callable[[Summary], None]) -> Callable[[str, Summary, Summary], None]:
    def apply(case: str, baseline: Summary, candidate: Summary) -> None:
        edit(candidate)

    return apply


def _sources_as_list(summary: Summary) -> None:
    for entry in summary["datasets"].values():
        entry["sources"] = list(entry["sources"])


def _excerpts_as_list(summary: Summary) -> None:
    for check in summary["suites"][CONFORMANCE]["checks"].values():
        check["excerpts"] = ["expected"]


def _file(content: str) -> Callable[[str, Evidence], Evidence]:
    """A candidate file that is not a summary: the content replaces the whole file."""

    def apply(case: str, evidence: Evidence) -> Evidence:
        baseline, candidate, arguments = _copy(list(evidence))
        return baseline, {"__raw__": content or json.dumps(candidate)[: len(json.dumps(candidate)) // 2]}, arguments

    return apply


# What became of a run's records file (under this key of the side's records evidence).
RECORDS_FILE = "__records_file__"
MISSING = "missing"
CUT = "cut"
# A byte copy of the baseline's records; the baseline's records appended to the candidate's; a
# records file of the baseline's put next to the candidate's.
REPLAYED = "replayed"
MIXED = "mixed"
EXTRA = "extra"
# How the candidate is stored and named (a summary key, never written): by default a folder named on
# the command line; otherwise under results/<shape>/ and named by its shape, with:
LAYOUT = "__layout__"
# its folder not named by its run id,
RENAMED = "renamed"
# next to it a healthy run of its shape (the baseline's scores and exchanges of its own) in a
# later-sorting folder that is not its run id,
SHADOW_BY_NAME = "shadow-by-name"
# the same under its own later-sorting run id, started an hour before the candidate,
SHADOW_STARTED_BEFORE = "shadow-started-before"
# the same started a day in the future (a clock running ahead).
SHADOW_FROM_THE_FUTURE = "shadow-from-the-future"


def _records_file(state: str, side: int = 1) -> Callable[[str, Evidence], Evidence]:
    def apply(case: str, evidence: Evidence) -> Evidence:
        sides = _copy(list(evidence))
        sides[side][RECORDS_FILE] = state
        return sides[0], sides[1], sides[2]

    return apply


def _lost_suite(case: str) -> str:
    return FAILING_SUITE[case]


MUTATIONS: tuple[Mutation, ...] = (
    # Fewer items, by any means.
    Mutation("drop half the failing suite's items", _on_candidate(_drop_half), removes=True),
    Mutation("drop exactly the items the candidate lost", _on_candidate(_drop_lost), removes=True),
    Mutation("keep the first 5 items of every suite (--k3-limit 5)", _on_candidate(_keep_first(5)), removes=True),
    Mutation("keep the first item of every suite (--k3-max-items 1)", _on_candidate(_keep_first(1)), removes=True),
    Mutation("the lost items with no sample", _on_candidate(_zero_samples_lost), removes=True),
    # Suites left out or renamed.
    Mutation("drop the failing suite", _on_candidate(_drop_suite), removes=True),
    Mutation("drop every accuracy suite", _on_candidate(_drop_accuracy_suites), removes=True),
    Mutation("drop the conformance suite (--ignore)", _on_candidate(_drop_conformance), removes=True),
    Mutation("rename the failing suite", _on_candidate(_rename(_lost_suite)), removes=True),
    Mutation("rename the conformance suite", _on_candidate(_rename(lambda case: CONFORMANCE)), removes=True),
    Mutation("every conformance check errors", _on_candidate(_checks_error), removes=True),
    Mutation("the failing checks left out", _on_candidate(_checks_dropped), removes=True),
    # Duplicates.
    Mutation("20 items duplicated under new ids", _on_candidate(_duplicate_items), removes=True),
    Mutation(
        "items not lost counted twice (merged duplicates)", _on_candidate(_double_samples_of_good), summary_only=True
    ),
    # Numbers edited.
    Mutation("looping and truncation counts zeroed", _on_candidate(_zero_events), summary_only=True),
    Mutation("the lost items given the baseline's scores", _on_candidate(_forge_correct), summary_only=True),
    Mutation("every suite given the baseline's scores", _on_candidate(_copy_baseline_scores), summary_only=True),
    Mutation("a forged sequential PASS (bounds at -12)", _on_candidate(_forged_sequential_pass), removes=True),
    Mutation("status edited to incomplete", _on_candidate(_status("incomplete"))),
    # Identity and settings.
    Mutation("reasoning effort low", _on_candidate(_setting("reasoning_effort", "low"))),
    Mutation("think mode kimi", _on_candidate(_setting("think_mode", "kimi"))),
    Mutation("seed 7", _on_candidate(_setting("seed", 7))),
    Mutation("another model id", _on_candidate(_setting("model", "some/other-model"))),
    Mutation("settings removed", _on_candidate(_drop_key("settings"))),
    Mutation("datasets removed", _on_candidate(_drop_key("datasets"))),
    Mutation("server information removed", _on_candidate(_drop_key("server_info"))),
    Mutation(
        "relabelled as the baseline's shape and server", _on_candidate(_relabel_as_baseline_shape), summary_only=True
    ),
    Mutation("another model id in the summary only", _on_candidate(_setting("model", "some/other")), summary_only=True),
    Mutation("seed 7 in the summary only", _on_candidate(_setting("seed", 7)), summary_only=True),
    Mutation("a relaunch's new media marker in the summary only", _on_candidate(_relaunched), summary_only=True),
    # Weak options.
    Mutation("--margin 40", _with_arguments("--margin", "40")),
    Mutation(
        "--margins for the failing suites at 40",
        _with_arguments("--margins", "agentic_coding=40,coding=40,small_model=40"),
    ),
    Mutation("--alpha 0.45", _with_arguments("--alpha", "0.45")),
    Mutation("--repetition-floor 0.9", _with_arguments("--repetition-floor", "0.9")),
    Mutation("--truncation-floor 0.9", _with_arguments("--truncation-floor", "0.9")),
    Mutation("--min-coverage 0", _with_arguments("--min-coverage", "0")),
    Mutation("--gate warn", _with_arguments("--gate", "warn"), policy=True),
    # Partial or unfit baselines.
    Mutation("baseline without the items the candidate lost", _on_candidate(_baseline_drops_lost), removes=True),
    Mutation("baseline without scores of the failing suite", _on_candidate(_baseline_drops_suite_scores), removes=True),
    Mutation("baseline without the failing suite at all", _on_candidate(_baseline_drops_suite), summary_only=True),
    Mutation("baseline that ran a subset", _on_candidate(_baseline_subset)),
    Mutation("baseline whose shape label its server contradicts", _on_candidate(_baseline_contradicted)),
    Mutation("baseline interrupted", _on_candidate(_baseline_status)),
    Mutation("candidate is the baseline itself", _on_candidate(_candidate_is_baseline)),
    Mutation("candidate is a relabelled copy of the baseline", _on_candidate(_relabelled_copy)),
    # Broken files.
    Mutation("no run_id", _on_candidate(_malformed(lambda summary: summary.pop("run_id")))),
    Mutation("no shape", _on_candidate(_malformed(lambda summary: summary.pop("shape")))),
    Mutation("datasets sources as a list", _on_candidate(_malformed(_sources_as_list))),
    Mutation("check excerpts as a list", _on_candidate(_malformed(_excerpts_as_list))),
    Mutation("summary cut in half (interrupted write)", _file(""), breaks_the_file=True, summary_only=True),
    Mutation("summary not an object", _file("[1, 2, 3]"), breaks_the_file=True, summary_only=True),
    # The summary edited after the run, its records left as the run wrote them.
    Mutation("the failing suite dropped from the summary only", _on_candidate(_drop_suite), summary_only=True),
    Mutation("the failing checks dropped from the summary only", _on_candidate(_checks_dropped), summary_only=True),
    Mutation("the lost items dropped from the summary only", _on_candidate(_drop_lost), summary_only=True),
    # The records edited or lost after the run, the summary left as written.
    Mutation("records file removed", _records_file(MISSING), records_only=True),
    Mutation("records file cut mid-line (interrupted copy)", _records_file(CUT), records_only=True),
    Mutation("the lost items' outcome lines deleted", _on_candidate(_drop_lost), records_only=True),
    Mutation("the baseline's records file removed", _records_file(MISSING, side=0), records_only=True),
    # Copies, replays and cross-run mixes (issue 35).
    Mutation("the baseline's exchanges replayed under the candidate's labels", _on_candidate(_replayed_exchanges)),
    Mutation("records a byte copy of the baseline's", _records_file(REPLAYED), records_only=True),
    Mutation("the baseline's records appended to the candidate's", _records_file(MIXED), records_only=True),
    Mutation("a records file of the baseline's next to the candidate's", _records_file(EXTRA), records_only=True),
    # Renames and clock skew: the candidate chosen by its shape.
    Mutation("the candidate's folder not named by its run id", _on_candidate(_layout(RENAMED))),
    Mutation("a healthy run in a later-sorting folder", _on_candidate(_layout(SHADOW_BY_NAME))),
    Mutation("a healthy run under a later-sorting id, started before", _on_candidate(_layout(SHADOW_STARTED_BEFORE))),
    Mutation("a healthy run started a day in the future", _on_candidate(_layout(SHADOW_FROM_THE_FUTURE))),
    Mutation("the candidate started a day in the future", _on_candidate(_started_in_the_future)),
    # Policy overrides within the allowed ranges: they may change the verdict, and must say so.
    Mutation(
        "--margins 10 for the failing suites",
        _with_arguments("--margins", "agentic_coding=10,coding=10,small_model=10"),
        policy=True,
    ),
    Mutation("--margin 10", _with_arguments("--margin", "10"), policy=True),
    Mutation("--alpha 0.1", _with_arguments("--alpha", "0.1"), policy=True),
    Mutation("--allow-differences seed,model", _with_arguments("--allow-differences", "seed,model"), policy=True),
)

# Mutations the gate cannot see through yet, with why. The harness keeps them, so that the day
# they hold, the test says so.
KNOWN_HOLES: dict[str, str] = {}


@dataclass(frozen=True)
class Outcome:
    exit_status: int
    verdict: str | None
    reasons: list[str]
    error: str
    notes: tuple[str, ...] = ()

    @property
    def rank(self) -> int:
        """How bad the outcome is for the candidate: PASS 0, INCONCLUSIVE 1, anything that fails 2."""
        if self.verdict is None or self.verdict in ("FAIL", "INCOMPLETE"):
            return 2
        return 1 if self.verdict == "INCONCLUSIVE" else 0

    def held_against(self, reference: Outcome | None) -> bool:
        """Held; or, under a policy override the report marks weaker, no better than `reference`, the
        verdict on the whole evidence under the same policy, and exiting as it does."""
        if self.held:
            return True
        weaker = any("weaker policy" in note for note in self.notes)
        return (
            reference is not None
            and weaker
            and self.rank >= reference.rank
            and (self.exit_status != 0 or reference.exit_status == 0)
        )

    @property
    def held(self) -> bool:
        """FAIL, or INCOMPLETE with a reason, or the input refused with one message; never exit 0."""
        if self.exit_status == 0:
            return False
        if self.verdict is None:
            return self.exit_status == 2 and bool(self.error.strip()) and "Traceback" not in self.error
        if self.verdict == "FAIL":
            return True
        return self.verdict == "INCOMPLETE" and bool(self.reasons)

    def shown(self) -> str:
        if self.verdict is None:
            return f"refused, exit {self.exit_status}: {self.error.strip().splitlines()[-1] if self.error else ''}"
        return f"{self.verdict}, exit {self.exit_status}"


def _write(directory: Path, summary: Summary, recorded: Summary) -> str:
    """The run folder: `summary` as written (sealing the head of the records the run wrote), and
    the records of the run `recorded` describes (the folder emptied first: no file of an earlier trial stays)."""
    shutil.rmtree(directory, ignore_errors=True)
    heads = write_records(directory, {key: value for key, value in recorded.items() if key != RECORDS_FILE})
    raw = summary.get("__raw__")
    written = {key: value for key, value in summary.items() if key != EXCHANGES_OF}
    written.setdefault("records_chain", heads)
    (directory / "summary.json").write_text(raw if isinstance(raw, str) else json.dumps(written))
    records = directory / "records-main.jsonl"
    theirs = directory.parent / "baseline" / "records-main.jsonl"
    state = recorded.get(RECORDS_FILE)
    if state == MISSING:
        records.unlink()
    elif state == CUT:
        content = records.read_bytes()
        records.write_bytes(content[: len(content) - 40])
    elif state == REPLAYED and theirs.is_file():
        shutil.copyfile(theirs, records)
    elif state == MIXED and theirs.is_file():
        records.write_bytes(records.read_bytes() + theirs.read_bytes())
    elif state == EXTRA and theirs.is_file():
        shutil.copyfile(theirs, directory / "records-gw9.jsonl")
    return str(directory)


def _write_candidate(workdir: Path, baseline: Summary, candidate: Summary, recorded: Summary) -> tuple[str, list[str]]:
    """The candidate stored as its layout says; what names it on the command line, and the options that go with it."""
    layout = candidate.get(LAYOUT)
    if layout is None or "__raw__" in candidate or not isinstance(candidate.get("shape"), str):
        return _write(workdir / "candidate", candidate, recorded), []
    results = workdir / "results"
    shutil.rmtree(results, ignore_errors=True)
    shape_dir = results / candidate["shape"]
    folder = "restored-from-cache" if layout == RENAMED else str(candidate.get("run_id"))
    _write(shape_dir / folder, candidate, recorded)
    if layout in (SHADOW_BY_NAME, SHADOW_STARTED_BEFORE, SHADOW_FROM_THE_FUTURE):
        healthy = _copy({key: value for key, value in recorded.items() if key not in (LAYOUT, RECORDS_FILE)})
        healthy["suites"] = _copy(baseline["suites"])
        healthy["run_id"] = "zzzz-run-healthy"
        if layout == SHADOW_FROM_THE_FUTURE:
            healthy["started_at"] = (datetime.now(timezone.utc) + timedelta(days=1)).isoformat()
        else:
            healthy["started_at"] = _later(candidate, -3600) if "started_at" in candidate else None
        name = "zzzz-restored" if layout == SHADOW_BY_NAME else healthy["run_id"]
        _write(shape_dir / name, healthy, healthy)
    return candidate["shape"], ["--results-dir", str(results)]


def judge_evidence(evidence: Evidence, workdir: Path, recorded: Evidence | None = None) -> Outcome:
    """`k3conformance compare BASELINE CANDIDATE --format json ARGS` on the evidence, each run's
    records those of `recorded` (the evidence itself unless given)."""
    baseline, candidate, arguments = evidence
    recorded_baseline, recorded_candidate, _ = recorded or evidence
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            named_baseline = _write(workdir / "baseline", baseline, recorded_baseline)
            named, options = _write_candidate(workdir, baseline, candidate, recorded_candidate)
            status = cli_main(["compare", named_baseline, named, "--format", "json", *options, *arguments])
        except SystemExit as exit_:  # argparse refuses a bad option value with exit 2
            status = int(exit_.code or 0)
    try:
        report = json.loads(stdout.getvalue())
    except json.JSONDecodeError:
        return Outcome(status, None, [], stderr.getvalue())
    return Outcome(status, report["verdict"], list(report["reasons"]), stderr.getvalue(), tuple(report["notes"]))


@dataclass(frozen=True)
class Trial:
    case: str
    mutations: tuple[str, ...]
    outcome: Outcome
    # Under a policy override: the verdict on the whole evidence under the same policy.
    reference: Outcome | None = None

    @property
    def held(self) -> bool:
        return self.outcome.held_against(self.reference)

    @property
    def known_hole(self) -> bool:
        return any(name in KNOWN_HOLES for name in self.mutations)


def start(case: str) -> Evidence:
    baseline, candidate = CASES[case]()
    return baseline, candidate, []


def pairs(mutations: Sequence[Mutation] = MUTATIONS) -> Iterable[tuple[Mutation, ...]]:
    """Every pair of the mutations (a file-breaking one only last)."""
    for first, second in itertools.combinations(mutations, 2):
        if first.breaks_the_file and second.breaks_the_file:
            continue
        yield (second, first) if first.breaks_the_file else (first, second)


def judged_singly(trials: Sequence[Trial]) -> list[Mutation]:
    """The mutations whose single trial got a verdict: a pair with a refused input is refused as
    that input alone, so the pairs worth trying are among these."""
    judged = {trial.mutations[0] for trial in trials if len(trial.mutations) == 1 and trial.outcome.verdict}
    return [mutation for mutation in MUTATIONS if mutation.name in judged]


def try_mutations(case: str, chosen: Iterable[tuple[Mutation, ...]]) -> list[Trial]:
    trials = []
    initial = start(case)
    references: dict[tuple[Mutation, ...], Outcome] = {}
    with tempfile.TemporaryDirectory() as directory:
        for mutations in chosen:
            # What the summaries say, and what the runs did (their records).
            evidence = recorded = initial
            for mutation in mutations:
                if not mutation.records_only:
                    evidence = mutation.apply(case, evidence)
                if not mutation.summary_only:
                    recorded = mutation.apply(case, recorded)
            outcome = judge_evidence(evidence, Path(directory), recorded)
            reference = None
            policies = tuple(mutation for mutation in mutations if mutation.policy)
            if policies and not outcome.held:
                if policies not in references:
                    policed = initial
                    for mutation in policies:
                        policed = mutation.apply(case, policed)
                    references[policies] = judge_evidence(policed, Path(directory))
                reference = references[policies]
            trials.append(Trial(case, tuple(mutation.name for mutation in mutations), outcome, reference))
    return trials


def table(trials: Sequence[Trial]) -> list[str]:
    """Per case and kind (single, pair): tried, held, not held (of which known holes)."""
    rows = ["| case | mutations | tried | held | not held | of which known holes |", "|---|---|---|---|---|---|"]
    for case in dict.fromkeys(trial.case for trial in trials):
        for size, label in ((1, "single"), (2, "pairs")):
            chosen = [trial for trial in trials if trial.case == case and len(trial.mutations) == size]
            if not chosen:
                continue
            held = sum(trial.held for trial in chosen)
            known = sum(1 for trial in chosen if not trial.held and trial.known_hole)
            rows.append(f"| {case} | {label} | {len(chosen)} | {held} | {len(chosen) - held} | {known} |")
    return rows
