"""Records chained to their run (runs/chain.py): a writer's lines verify from the file's anchor, a
resumed writer continues the chain, and a cut, a line from another run or an edit is named where it is."""

from __future__ import annotations

import json
from pathlib import Path

from k3conformance.runs.chain import anchor, check_file, check_heads, identity_digest, last_chain
from k3conformance.runs.records import RecordWriter, iter_whole_lines

START = anchor(identity_digest({"run_id": "run-1"}), "records-main.jsonl")


def _outcome(index: int) -> dict[str, object]:
    return {"kind": "outcome", "nodeid": f"t::{index}", "suite": "math", "outcome": "passed"}


def _write(path: Path, count: int, run_id: str = "run-1", start: str = START) -> RecordWriter:
    writer = RecordWriter(path, run_id, start)
    for index in range(count):
        writer.write(_outcome(index))
    writer.close(compress=False)
    return writer


def test_a_written_file_verifies_and_a_resumed_writer_continues_its_chain(tmp_path: Path) -> None:
    path = tmp_path / "records-main.jsonl"
    first = _write(path, 3)
    # The session dies mid-line; the resumed one writes past the torn line and chains on.
    with path.open("a") as handle:
        handle.write('{"kind": "outcome", "nodeid": "t::torn"')
    resumed = _write(path, 2)
    assert resumed.count == 5 and resumed.head != first.head
    found = check_file(path.name, iter_whole_lines(path), START, "run-1", "tp8/run-1")
    assert found.problem is None and found.count == 5 and found.head == resumed.head
    assert len(found.outcomes) == 5 and json.loads(found.outcomes[0])["run_id"] == "run-1"
    assert last_chain(iter_whole_lines(path)) == (resumed.head, 5)
    assert check_heads({path.name: found}, {path.name: resumed.sealed_head()}, "tp8/run-1") == []


def test_a_cut_file_says_where_it_is_cut_and_that_a_resume_cannot_help(tmp_path: Path) -> None:
    path = tmp_path / "records-main.jsonl"
    writer = _write(path, 4)
    content = path.read_bytes()
    path.write_bytes(content[: len(content) - 40])
    found = check_file(path.name, iter_whole_lines(path), START, "run-1", "tp8/run-1")
    (problem,) = check_heads({path.name: found}, {path.name: writer.sealed_head()}, "tp8/run-1")
    assert "records cut at line 4 of records-main.jsonl: they end before the sealed head (3 of 4 records)" in problem
    assert "rerun it (a resume cannot bring the lines back)" in problem


def test_a_line_of_another_run_or_an_edit_breaks_the_chain_where_it_stands(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "records-main.jsonl", tmp_path / "other" / "records-main.jsonl"
    _write(ours, 3)
    _write(theirs, 2, run_id="run-9", start=anchor(identity_digest({"run_id": "run-9"}), "records-main.jsonl"))
    lines = ours.read_bytes().splitlines(keepends=True)
    mixed = [lines[0], theirs.read_bytes().splitlines(keepends=True)[1], *lines[1:]]
    ours.write_bytes(b"".join(mixed))
    found = check_file(ours.name, iter_whole_lines(ours), START, "run-1", "tp8/run-1")
    assert found.problem == "records of run run-9 inside run tp8/run-1 (records-main.jsonl line 2)"
    assert found.count == 1
    ours.write_bytes(lines[0] + lines[1].replace(b'"passed"', b'"failed"') + lines[2])
    found = check_file(ours.name, iter_whole_lines(ours), START, "run-1", "tp8/run-1")
    assert found.problem is not None and "the chain breaks at line 2" in found.problem


def test_a_replayed_file_does_not_start_from_the_sealed_identity(tmp_path: Path) -> None:
    path = tmp_path / "records-main.jsonl"
    _write(path, 2, start=anchor(identity_digest({"run_id": "run-1", "shape": "tp8"}), path.name))
    found = check_file(path.name, iter_whole_lines(path), START, "run-1", "tp8/run-1")
    assert found.problem is not None and "does not start from the run's sealed identity" in found.problem
    assert check_heads({}, None, "tp8/run-1")[0].startswith("tp8/run-1: its summary seals no records chain")
