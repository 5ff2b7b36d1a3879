"""Finding and loading a stored run to gate against (or, for `k3conformance compare`, to gate).

A run is named by a shape (`tp8`: the newest complete run under `results/tp8/` that was
stored on purpose as a baseline, with `--k3-save-baseline`), by a run folder, or by its
`summary.json`. A quick `-k` run or a conformance-only run of the same shape is never taken
by accident. Whatever is wrong with it (missing, corrupt, incomplete, not fitting the
schema of `runs/schema.py`) is one `BaselineError` with the message to show, raised before
anything is sent to the endpoint.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from k3conformance.runs.chain import RunRecords, anchor, check_file, identity_digest, sealed_identity
from k3conformance.runs.records import (
    STATUS_COMPLETE,
    SUMMARY_FILE,
    MisfiledRun,
    UnreadableJson,
    iter_whole_lines,
    newest_run,
    read_json,
    read_summary,
    record_files,
)
from k3conformance.runs.schema import RunSummary, SchemaError, validate_summary
from k3conformance.stats.paired import ItemTotals


class BaselineError(Exception):
    """A run that cannot be gated against; the message says what to do."""


@dataclass(frozen=True)
class StoredRun:
    """A run's summary as the gate reads it."""

    summary: RunSummary
    # Where it came from, for the report; None for the run in progress.
    path: Path | None
    # Why this run was taken, for the header and the report.
    origin: str = "the run in progress"
    # Each suite's item totals, built once: the sequential gate reads the baseline's after every test.
    _item_totals: dict[str, Mapping[str, ItemTotals]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    # Its records checked against their chain, read once: the copy check and the gate both read them.
    _records: list[RunRecords] = field(default_factory=list, init=False, repr=False, compare=False)

    @property
    def run_dir(self) -> Path | None:
        if self.path is None:
            return None
        return self.path.parent if self.path.is_file() else self.path

    def records(self) -> RunRecords:
        """Every records file of the run, each checked against its chain (runs/chain.py)."""
        if not self._records:
            run_dir = self.run_dir
            files = {}
            if run_dir is not None:
                digest = identity_digest(sealed_identity(run_dir))
                for path in record_files(run_dir):
                    name = path.name.removesuffix(".zst")
                    start = anchor(digest, name)
                    files[name] = check_file(name, iter_whole_lines(path), start, self.summary["run_id"], self.label)
            self._records.append(RunRecords(files))
        return self._records[0]

    @property
    def label(self) -> str:
        return f"{self.summary['shape']}/{self.summary['run_id']}"

    @property
    def suites(self) -> Mapping[str, Mapping[str, Any]]:
        return self.summary["suites"]

    def item_totals(self, suite: str) -> Mapping[str, ItemTotals]:
        """Every item the run scored, with zero-sample items too (the gate counts them as missing);
        built on first use and kept, since a stored summary does not change."""
        if suite not in self._item_totals:
            self._item_totals[suite] = MappingProxyType(self._build_item_totals(suite))
        return self._item_totals[suite]

    def _build_item_totals(self, suite: str) -> dict[str, ItemTotals]:
        scores = self.suites[suite]["scores"] if suite in self.suites else {}
        return {item: ItemTotals(entry["samples"], float(entry["correct"])) for item, entry in scores.items()}

    def event_count(self, suite: str, event: str, items: set[str]) -> tuple[int, int]:
        """(of `items`, those with the event in at least one sample; how many). Items, not
        samples: the samples of one item are not independent, and Fisher's test needs units
        that are. The schema guarantees every item records every event."""
        scores = self.suites[suite]["scores"]
        return sum(scores[item][event] > 0 for item in items), len(items)

    def event_samples(self, suite: str, event: str, items: set[str]) -> dict[str, tuple[int, int]]:
        """Of each of `items`, (samples with the event, samples)."""
        scores = self.suites[suite]["scores"]
        return {item: (int(scores[item][event]), int(scores[item]["samples"])) for item in items}

    def scored_suites(self) -> set[str]:
        return {name for name, suite in self.suites.items() if suite.get("scores")}

    def dataset_sources(self) -> dict[str, dict[str, str]]:
        """Per suite, the datasets it drew items from and their content hashes."""
        sources: dict[str, dict[str, str]] = {}
        for suite, entry in self.summary.get("datasets", {}).items():
            named = dict(entry.get("sources") or {})
            if not named and entry.get("dataset"):
                named[entry["dataset"]] = entry.get("dataset_sha256", "")
            sources[suite] = named
        return sources


def load_run(reference: str, results_dir: Path, *, baseline: bool = True) -> StoredRun:
    """The run `reference` names: a shape under `results_dir`, a run folder or a summary file.
    As a baseline it must be complete, and a shape means its newest complete run stored with
    --k3-save-baseline; as a candidate, a shape means its newest run of any status."""
    path = Path(reference)
    if path.is_file():
        return _load_summary(path, baseline=baseline, origin=f"named as {reference}")
    if path.is_dir() and (path / SUMMARY_FILE).is_file():
        return _load_summary(path / SUMMARY_FILE, baseline=baseline, origin=f"named as {reference}")
    if path.is_dir():
        return _latest(path, baseline)
    if "/" in reference or reference.endswith(".json"):
        raise BaselineError(f"no run at {reference}: expected a run folder, its {SUMMARY_FILE}, or a shape name")
    shape_dir = results_dir / reference
    if not shape_dir.is_dir():
        stored = sorted(p.name for p in results_dir.iterdir() if p.is_dir()) if results_dir.is_dir() else []
        known = f"stored shapes: {', '.join(stored)}" if stored else f"no runs are stored under {results_dir}"
        raise BaselineError(
            f"no stored runs of shape {reference!r} under {results_dir} ({known}). Store a baseline first: "
            f"run the suites against that deployment with --k3-shape {reference} --k3-save-baseline"
        )
    return _latest(shape_dir, baseline)


def _latest(shape_dir: Path, baseline: bool) -> StoredRun:
    def wanted(summary: dict[str, Any] | None) -> bool:
        if summary is None:
            return False
        return not baseline or (summary.get("status") == STATUS_COMPLETE and summary.get("baseline") is True)

    try:
        found = newest_run(shape_dir, wanted)
    except MisfiledRun as error:
        raise BaselineError(str(error)) from None
    if found is None:
        runs = [read_summary(path) for path in shape_dir.iterdir() if path.is_dir()]
        complete = sum(1 for run in runs if run is not None and run.get("status") == STATUS_COMPLETE)
        raise BaselineError(
            f"no run under {shape_dir} was stored as a baseline ({len(runs)} runs, {complete} complete): "
            "store one on purpose with --k3-save-baseline (a complete run of the accuracy suites), "
            "or name a run folder"
        )
    run_dir, _ = found
    origin = (
        f"the newest complete run of {shape_dir.name} stored with --k3-save-baseline"
        if baseline
        else f"the newest run of {shape_dir.name}"
    )
    return _load_summary(run_dir / SUMMARY_FILE, baseline=baseline, origin=origin)


def _load_summary(path: Path, *, baseline: bool, origin: str) -> StoredRun:
    try:
        summary = validate_summary(read_json(path, "the run summary"), str(path))
    except (UnreadableJson, SchemaError) as error:
        raise BaselineError(str(error)) from None
    if baseline and summary["status"] != STATUS_COMPLETE:
        raise BaselineError(
            f"the run {path.parent} is {summary['status']}, not complete: gate against "
            "complete runs only (finish it with --k3-resume)"
        )
    if baseline:
        _check_admissible(summary, path)
    return StoredRun(summary, path, origin)


def _check_admissible(summary: RunSummary, path: Path) -> None:
    """What run/admission.py refuses to store, refused when read too (a summary edited, or named
    as a folder): a subset not declared as one, a shape label its server contradicts."""
    selection = summary.get("selection")
    subset = selection is not None and selection["subset"]
    if subset and selection is not None and "subset_declared" not in summary:
        # Written before issue 21: `subset` was true for every default run (vendor-only checks
        # deselected), so only the named selections count.
        subset = bool(selection.get("keyword") or selection.get("markers") or selection.get("limit"))
    if subset and not summary.get("subset_declared"):
        raise BaselineError(
            f"the run {path.parent} ran a subset of the items (-k, node ids, --k3-limit...): a baseline must run "
            "every item of its suites; store one with --k3-save-baseline"
        )
    contradictions = (summary.get("shape_settings") or {}).get("contradictions") or []
    if contradictions:
        raise BaselineError(
            f"the run {path.parent} is labelled {summary['shape']}, which its server's own arguments contradict "
            f"({contradictions[0]}): it is no baseline of that shape"
        )


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


def check_not_the_baseline(baseline: StoredRun, candidate: StoredRun) -> None:
    """Raise when the candidate is the baseline itself, or replays its exchanges, whatever its labels
    say (issue 21, reproduction 10: `compare B B` was accepted; issue 35: a relabelled copy with a
    new run id and start passed). A live request carries a nonce drawn for it (runs/chain.py): a
    run that shares any with the baseline sent none of those requests itself."""
    if baseline.summary["run_id"] == candidate.summary["run_id"]:
        raise BaselineError(
            f"the candidate {candidate.label} is the baseline itself ({baseline.label}: the same run id): gate a "
            "run of the deployment under test against it"
        )
    if baseline.run_dir is None or candidate.run_dir is None:
        return
    theirs = baseline.records().nonces
    shared = candidate.records().nonces & theirs
    if shared:
        raise BaselineError(
            f"the candidate {candidate.label} is a copy of the baseline {baseline.label}: {len(shared)} of its "
            f"exchanges carry the baseline's request nonces, which only the baseline's live requests had; a replay "
            "is not a run: gate a run of the deployment under test against it"
        )
