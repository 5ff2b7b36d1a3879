"""The records are the evidence: a stored run's summary is a cache of its outcome records.

Every test of a run writes one outcome record (its suite, item, check, outcome and score) the
moment it ends, and the summary's suites are the same outcomes tallied (scoring/suite_tally.py).
The gate reads a stored run's records again, tallies them the same way, and compares what a
verdict is made of: each item's totals (samples, correct, no answer, truncated, looping) and each
check's counts (passed, failed, errors, infrastructure errors). Where the summary says anything
else (numbers edited consistently, a suite dropped from it, scores copied from the baseline), the
verdict is judged on the records and says INCOMPLETE, naming the disagreement; a complete run
without records is INCOMPLETE too, and so is one whose summary disagrees with the identity
sealed when it started (gate/identity.py), or that has none. A resumed run wrote some tests' outcomes once per session:
each test's last outcome counts (the session that wrote the summary reran every test it kept).

Only the lines that chain from the run's sealed identity count (runs/chain.py), and every file
must end at the head the summary sealed: records of another run, a file cut short, reordered or
replayed are INCOMPLETE, named. A sealed start more than CLOCK_SKEW_S in the future is flagged.

A run that is not complete is INCOMPLETE on its status alone, and its records may hold outcomes
an interrupted controller never tallied, so only complete runs are read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from k3conformance.gate.identity import described, identity_differences, identity_of, read_sealed
from k3conformance.runs.chain import check_heads
from k3conformance.runs.records import STATUS_COMPLETE, seconds_ahead
from k3conformance.runs.schema import RunSummary
from k3conformance.runs.stored import StoredRun
from k3conformance.scoring.suite_tally import SuiteTally

_ITEM_FIELDS = ("samples", "correct", "no_answer", "truncated", "looping")
_CHECK_FIELDS = ("passed", "failed", "errors", "infra_errors")
_SHOWN = 3
# How far a run's sealed start may lie in the future before it is flagged: clocks of CI machines
# drift by seconds, not minutes.
CLOCK_SKEW_S = 300.0

EvidenceView = dict[str, dict[str, dict[str, tuple[float, ...]]]]


@dataclass(frozen=True)
class RecordedRun:
    """A stored run as its records have it: the run to judge (its summary's suites replaced by the
    records' tallies where the two disagree) and what was wrong with the summary, if anything."""

    run: StoredRun
    problems: tuple[str, ...]


def judged_on_records(run: StoredRun, now: datetime | None = None) -> RecordedRun:
    """`run` with its suites taken from its records where its summary disagrees with them."""
    run_dir = run.run_dir
    if run_dir is None or run.summary.get("status") != STATUS_COMPLETE:
        return RecordedRun(run, ())
    problems = _identity_problems(run, run_dir, now or datetime.now(timezone.utc))
    tallies = tallies_from_records(run)
    if tallies is None:
        problems.append(
            f"{run.label}: no records (records-*.jsonl or .jsonl.zst) next to its summary: the verdict cannot be checked"
        )
        return RecordedRun(run, tuple(problems))
    problems += check_heads(run.records().files, run.summary.get("records_chain"), run.label)
    recorded = {name: tally.to_summary() for name, tally in sorted(tallies.items())}
    differences = view_differences(evidence_view(run.suites), evidence_view(recorded))
    if not differences:
        return RecordedRun(run, tuple(problems))
    shown = described(differences, _SHOWN)
    summary: RunSummary = {**run.summary, "suites": recorded}
    problem = (
        f"{run.label}: its summary disagrees with its records ({shown}): judged on the records, "
        "which are the evidence; a summary is never trusted over them"
    )
    return RecordedRun(StoredRun(summary, run.path, run.origin), (*problems, problem))


def _identity_problems(run: StoredRun, run_dir: Path, now: datetime) -> list[str]:
    """Whether the summary says the run ran against what was sealed when it started, and when."""
    sealed = read_sealed(run_dir)
    if sealed is None:
        return [f"{run.label}: no sealed identity (identity.json): nothing says what the run ran against"]
    problems = []
    ahead = seconds_ahead(sealed.get("started_at"), now)
    if ahead is not None and ahead > CLOCK_SKEW_S:
        problems.append(
            f"{run.label}: its sealed start time {sealed['started_at']} is {ahead:.0f} s in the future (more than the "
            f"{CLOCK_SKEW_S:.0f} s allowed for clock skew): a clock running ahead, so its place among the runs of "
            "its shape cannot be trusted"
        )
    differences = identity_differences(sealed, identity_of(run.summary))
    if differences:
        problems.append(
            f"{run.label}: its summary disagrees with the identity sealed when the run started ({described(differences)})"
        )
    return problems


def outcome_records(run: StoredRun) -> Iterator[dict[str, Any]]:
    """Each test's last outcome record, over every process's records file, of the lines that chain
    from the run's sealed identity (runs/chain.py): a line past a break in the chain is no evidence."""
    latest: dict[str, dict[str, Any]] = {}
    for raw in run.records().outcome_lines():
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        nodeid = record.get("nodeid") if isinstance(record, dict) else None
        if not isinstance(nodeid, str) or not isinstance(record.get("suite"), str):
            continue
        earlier = latest.get(nodeid)
        if earlier is None or str(record.get("written_at", "")) >= str(earlier.get("written_at", "")):
            latest[nodeid] = record
    yield from latest.values()


def tallies_from_records(run: StoredRun) -> dict[str, SuiteTally] | None:
    """Per suite, the tally of the run's outcome records; None when the run has no records file."""
    if not run.records().files:
        return None
    tallies: dict[str, SuiteTally] = {}
    for record in outcome_records(run):
        try:
            tallies.setdefault(record["suite"], SuiteTally()).add(record, record["nodeid"])
        except (KeyError, TypeError, ValueError, AttributeError):
            continue  # a malformed line is no evidence
    return tallies


def evidence_view(suites: Mapping[str, Mapping[str, Any]]) -> EvidenceView:
    """What a verdict reads of each suite: item totals and check counts, without the zeros."""
    view: EvidenceView = {}
    for name, suite in suites.items():
        scores = {
            item: tuple(float(entry.get(field, 0)) for field in _ITEM_FIELDS)
            for item, entry in (suite.get("scores") or {}).items()
        }
        checks = {
            check: counts
            for check, entry in (suite.get("checks") or {}).items()
            if any(counts := tuple(float(entry.get(field, 0)) for field in _CHECK_FIELDS))
        }
        if scores or checks:
            view[name] = {"scores": scores, "checks": checks}
    return view


def view_differences(summary: EvidenceView, records: EvidenceView) -> list[str]:
    """Where the summary's view differs from the records', one line each."""
    differences = []
    for suite in sorted(summary.keys() | records.keys()):
        if suite not in records:
            differences.append(f"{suite}: in the summary, not in the records")
            continue
        if suite not in summary:
            differences.append(f"{suite}: in the records, not in the summary")
            continue
        for part, fields in (("scores", _ITEM_FIELDS), ("checks", _CHECK_FIELDS)):
            said, recorded = summary[suite][part], records[suite][part]
            for key in sorted(said.keys() | recorded.keys()):
                if said.get(key) != recorded.get(key):
                    differences.append(
                        f"{suite}/{key}: the summary says {_shown(said.get(key), fields)}, "
                        f"the records {_shown(recorded.get(key), fields)}"
                    )
    return differences


def _shown(values: tuple[float, ...] | None, fields: tuple[str, ...]) -> str:
    if values is None:
        return "nothing"
    return ", ".join(f"{field} {value:g}" for field, value in zip(fields, values, strict=True) if value) or "zeros"
