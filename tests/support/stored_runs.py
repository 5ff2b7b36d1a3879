"""Stored runs written by hand: a summary and the outcome records it is a cache of.

The gate judges a stored run on its records (k3conformance/gate/evidence.py), so a hand-written
summary needs records that say the same (one outcome record per scored item, carrying its
totals, and per counted check result) and the identity sealed when the run started. `write_run`
writes all three; `records_from` lets a test write a summary that its records and identity
contradict (a summary edited after the run).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from k3conformance.gate.identity import identity_of
from k3conformance.runs.chain import IDENTITY_FILE, anchor, chained_lines, identity_digest

RECORDS_FILE = "records-main.jsonl"
# A summary key (never written) naming the run whose exchanges the records replay: a copy of that
# run's response records, nonces and all. Without it, the run's own exchanges.
EXCHANGES_OF = "__exchanges_of__"
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


def response_records(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """One response record per scored item, each with the nonce of the exchange it stands for: the
    run's own (a stand-in for the nonce drawn per request, unique to the run), or those of the run
    `EXCHANGES_OF` names, for a replay of its records."""
    exchanges = str(summary.get(EXCHANGES_OF) or summary.get("run_id"))
    records = []
    for suite, entry in (summary.get("suites") or {}).items():
        for item in entry.get("scores") or {}:
            nonce = hashlib.sha256(f"{exchanges}/{suite}/{item}".encode()).hexdigest()[:16]
            records.append(
                {"kind": "response", "suite": suite, "item": item, "sample": 0, "step": "answer", "k3_nonce": nonce}
            )
    return records


def write_records(directory: Path, source: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The records of the run `source` describes, chained from its sealed identity (written too);
    returns the heads its summary seals."""
    identity = identity_of(source)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / IDENTITY_FILE).write_text(json.dumps(identity))
    records = [*response_records(source), *outcome_records(source)]
    lines = list(chained_lines(records, str(source.get("run_id")), anchor(identity_digest(identity), RECORDS_FILE)))
    (directory / RECORDS_FILE).write_text("".join(lines))
    head = json.loads(lines[-1])["chain"] if lines else None
    return {RECORDS_FILE: {"head": head, "records": len(lines)}}


def rewrite_records(directory: Path, records: list[dict[str, Any]], file_name: str = RECORDS_FILE) -> None:
    """The run folder's records file `file_name` replaced by `records`, chained as its writer would
    have (a resumed run's sessions each appending), its summary sealing the new head."""
    identity = json.loads((directory / IDENTITY_FILE).read_text())
    plain = [{key: value for key, value in record.items() if key not in ("run_id", "chain")} for record in records]
    start = anchor(identity_digest(identity), file_name)
    lines = list(chained_lines(plain, str(identity["run_id"]), start))
    (directory / file_name).write_text("".join(lines))
    summary = json.loads((directory / "summary.json").read_text())
    heads = summary.get("records_chain") or {}
    heads[file_name] = {"head": json.loads(lines[-1])["chain"], "records": len(lines)}
    summary["records_chain"] = heads
    (directory / "summary.json").write_text(json.dumps(summary))


def write_run(directory: Path, summary: dict[str, Any], records_from: dict[str, Any] | None = None) -> str:
    """The run folder `directory`: `summary` as its summary.json (sealing its records' heads unless
    it says otherwise), and the outcome records of `records_from` (the summary itself unless given)
    as its records, with its sealed identity; returns the folder."""
    directory.mkdir(parents=True, exist_ok=True)
    heads = write_records(directory, records_from or summary)
    written = {key: value for key, value in summary.items() if key != EXCHANGES_OF}
    written.setdefault("records_chain", heads)
    (directory / "summary.json").write_text(json.dumps(written))
    return str(directory)
