"""Finding and loading a stored run to gate against (or, for `k3conformance compare`, to gate).

A run is named by a shape (`tp8`: the newest *complete* run under `results/tp8/`), by a run
folder, or by its `summary.json`. Whatever is wrong with it (missing, corrupt, incomplete,
written by a version without per-item scores) is one `BaselineError` with the message to
show, raised before anything is sent to the endpoint.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from k3conformance.gate.statistics import ItemTotals
from k3conformance.runs.records import STATUS_COMPLETE, SUMMARY_FILE, newest_run


class BaselineError(Exception):
    """A run that cannot be gated against; the message says what to do."""


@dataclass(frozen=True)
class StoredRun:
    """A run's summary as the gate reads it."""

    summary: Mapping[str, Any]
    # Where it came from, for the report; None for the run in progress.
    path: Path | None

    @property
    def label(self) -> str:
        return f"{self.summary.get('shape', '?')}/{self.summary.get('run_id', '?')}"

    @property
    def suites(self) -> Mapping[str, Mapping[str, Any]]:
        suites: Mapping[str, Mapping[str, Any]] = self.summary.get("suites") or {}
        return suites

    def item_totals(self, suite: str) -> dict[str, ItemTotals]:
        scores: Mapping[str, Mapping[str, Any]] = self.suites.get(suite, {}).get("scores") or {}
        return {item: ItemTotals(int(entry["samples"]), float(entry["correct"])) for item, entry in scores.items()}

    def event_count(self, suite: str, event: str) -> tuple[int, int] | None:
        """(items with the event in at least one sample, items); None when the run did not
        record the event (a summary written before it was measured). Items, not samples:
        the samples of one item are not independent, and Fisher's test needs units that are."""
        scores: Mapping[str, Mapping[str, Any]] = self.suites.get(suite, {}).get("scores") or {}
        if not scores or any(event not in entry for entry in scores.values()):
            return None
        return sum(int(entry[event]) > 0 for entry in scores.values()), len(scores)

    def scored_suites(self) -> set[str]:
        return {name for name, suite in self.suites.items() if suite.get("scores")}

    def dataset_sources(self) -> dict[str, dict[str, str]]:
        """Per suite, the datasets it drew items from and their content hashes."""
        sources: dict[str, dict[str, str]] = {}
        for suite, entry in (self.summary.get("datasets") or {}).items():
            named = dict(entry.get("sources") or {})
            if not named and entry.get("dataset"):
                named[entry["dataset"]] = entry.get("dataset_sha256", "")
            sources[suite] = named
        return sources


def load_run(reference: str, results_dir: Path, *, require_complete: bool = True) -> StoredRun:
    """The run `reference` names: a shape under `results_dir` (its newest complete run, or
    its newest run of any status without `require_complete`), a run folder or a summary file."""
    path = Path(reference)
    if path.is_file():
        return _load_summary(path, require_complete=require_complete)
    if path.is_dir() and (path / SUMMARY_FILE).is_file():
        return _load_summary(path / SUMMARY_FILE, require_complete=require_complete)
    if path.is_dir():
        return _latest(path, require_complete)
    if "/" in reference or reference.endswith(".json"):
        raise BaselineError(f"no run at {reference}: expected a run folder, its {SUMMARY_FILE}, or a shape name")
    shape_dir = results_dir / reference
    if not shape_dir.is_dir():
        stored = sorted(p.name for p in results_dir.iterdir() if p.is_dir()) if results_dir.is_dir() else []
        known = f"stored shapes: {', '.join(stored)}" if stored else f"no runs are stored under {results_dir}"
        raise BaselineError(
            f"no stored runs of shape {reference!r} under {results_dir} ({known}). Store a baseline first: "
            f"run the suites against that deployment with --k3-shape {reference}"
        )
    return _latest(shape_dir, require_complete)


def _latest(shape_dir: Path, require_complete: bool) -> StoredRun:
    def wanted(summary: dict[str, Any] | None) -> bool:
        return summary is not None and (summary.get("status") == STATUS_COMPLETE or not require_complete)

    found = newest_run(shape_dir, wanted)
    if found is None:
        runs = sum(1 for path in shape_dir.iterdir() if path.is_dir())
        raise BaselineError(
            f"no complete run under {shape_dir} ({runs} unfinished or unreadable): a baseline must be a complete "
            "run; finish one with --k3-resume or name a run folder"
        )
    run_dir, summary = found
    assert summary is not None
    return _checked(summary, run_dir / SUMMARY_FILE)


def _load_summary(path: Path, *, require_complete: bool) -> StoredRun:
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise BaselineError(f"cannot read the run summary {path}: {error.strerror or error}") from None
    except ValueError as error:
        raise BaselineError(f"the run summary {path} is corrupt (not JSON: {error})") from None
    if not isinstance(summary, dict):
        raise BaselineError(f"the run summary {path} is corrupt (not a JSON object)")
    if require_complete and summary.get("status") != STATUS_COMPLETE:
        raise BaselineError(
            f"the run {path.parent} is {summary.get('status', 'of unknown status')}, not complete: gate against "
            "complete runs only (finish it with --k3-resume)"
        )
    return _checked(summary, path)


def _checked(summary: dict[str, Any], path: Path) -> StoredRun:
    suites = summary.get("suites")
    if not isinstance(suites, dict) or not suites:
        raise BaselineError(f"the run summary {path} records no suites: nothing to compare with")
    for name, suite in suites.items():
        scores = suite.get("scores") if isinstance(suite, dict) else None
        if scores is None or not isinstance(scores, dict):
            raise BaselineError(
                f"the run summary {path} has no per-item scores for suite {name!r}: it was "
                "written by an older k3conformance; run the baseline again"
            )
        for item, entry in scores.items():
            if not isinstance(entry, dict) or not {"samples", "correct"} <= entry.keys():
                raise BaselineError(f"the run summary {path} is corrupt: suite {name!r} item {item!r} has no scores")
    return StoredRun(summary, path)


def check_same_datasets(baseline: StoredRun, candidate_sources: Mapping[str, Mapping[str, str]]) -> None:
    """Raise when this run would draw a suite's items from other data than the baseline did:
    a dataset whose content changed, or no dataset in common at all."""
    for suite, theirs in baseline.dataset_sources().items():
        ours = candidate_sources.get(suite)
        if not ours or not theirs:
            continue
        changed = [name for name in theirs.keys() & ours.keys() if theirs[name] and ours[name] != theirs[name]]
        if changed:
            raise BaselineError(
                f"suite {suite!r}: dataset {', '.join(sorted(changed))} has changed since the baseline "
                f"{baseline.label} (content hash differs): scores on other items cannot be compared; "
                "store a new baseline"
            )
        if not theirs.keys() & ours.keys():
            raise BaselineError(
                f"suite {suite!r}: the baseline {baseline.label} used {', '.join(sorted(theirs))}, this run uses "
                f"{', '.join(sorted(ours))}: no items in common to compare"
            )
