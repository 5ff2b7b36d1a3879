"""Stored runs written by hand: a summary and the outcome records it is a cache of.

The gate judges a stored run on its records (k3conformance/gate/evidence.py), so a hand-written
summary needs records that say the same (one outcome record per scored item, carrying its
totals, and per counted check result) and the identity sealed when the run started. `write_run`
writes all three; `records_from` lets a test write a summary that its records and identity
contradict (a summary edited after the run).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from k3conformance.gate.identity import IDENTITY_FILE, identity_of

# The outcome each check count stands for, as run/tally.py classifies a test.
_OUTCOMES = {"passed": "passed", "failed": "failed", "errors": "error", "infra_errors": "infra_error"}


def outcome_records(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Outcome records that tally to the summary's item totals and check counts. A scored item's
    record is a skipped test of its own (it counts toward no check), as a check's results carry no
    score; the gate compares totals and counts, not test names."""
    records: list[dict[str, Any]] = []
    for suite, entry in (summary.get("suites") or {}).items():
        for item, totals in (entry.get("scores") or {}).items():
            score = {field: totals.get(field, 0) for field in ("samples", "correct", "no_answer", "truncated")}
            score.update(looping=totals.get("looping", 0), loop_kinds={}, output_tokens=0, details=[])
            records.append(_record(suite, f"{suite}::score[{item}]", item, "test_score", None, "skipped", score))
        for check, counts in (entry.get("checks") or {}).items():
            name, _, mode = check.partition("[")
            for field, outcome in _OUTCOMES.items():
                for index in range(int(counts.get(field, 0))):
                    nodeid = f"{suite}::{check}::{field}-{index}"
                    records.append(_record(suite, nodeid, None, f"test_{name}", mode.rstrip("]") or None, outcome))
    return records


def _record(
    suite: str, nodeid: str, item: str | None, test: str, mode: str | None, outcome: str, score: Any = None
) -> dict[str, Any]:
    return {
        "kind": "outcome",
        "nodeid": nodeid,
        "written_at": "2026-12-01T00:00:00.000+00:00",
        "suite": suite,
        "item": item,
        "test": test,
        "mode": mode,
        "outcome": outcome,
        "layer": None,
        "message": "",
        "metrics": {},
        "score": score,
    }


def write_run(directory: Path, summary: dict[str, Any], records_from: dict[str, Any] | None = None) -> str:
    """The run folder `directory`: `summary` as its summary.json, and the outcome records of
    `records_from` (the summary itself unless given) as its records; returns the folder."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "summary.json").write_text(json.dumps(summary))
    source = records_from or summary
    lines = (json.dumps(record) + "\n" for record in outcome_records(source))
    (directory / "records-main.jsonl").write_text("".join(lines))
    (directory / IDENTITY_FILE).write_text(json.dumps(identity_of(source)))
    return str(directory)
