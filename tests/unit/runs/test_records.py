"""Records store a conversation's history once and read back whole."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from random import Random
from typing import Any

from k3conformance.runs.records import (
    MESSAGES_FROM,
    SAME_AS_BEFORE,
    RecordWriter,
    ResumeIndex,
    compress_records,
    expand_records,
    iter_lines,
    iter_records,
    record_files,
)

TOOLS = [{"type": "function", "function": {"name": "read_file", "parameters": {"type": "object"}}}]


def response(item: str, step: str, messages: list[dict[str, Any]], **request: Any) -> dict[str, Any]:
    return {
        "kind": "response",
        "suite": "agentic_coding",
        "item": item,
        "sample": 0,
        "step": step,
        "fingerprint": f"{item}-{step}",
        "request": {"model": "m", "tools": TOOLS, "messages": messages, **request},
        "status": "ok",
        "response": {"content": f"answer {step}"},
    }


def conversation(item: str, turns: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"task {item} " + "x" * 2000}]
    records = []
    for turn in range(1, turns + 1):
        records.append(response(item, f"turn-{turn:03d}", list(messages)))
        messages += [{"role": "assistant", "content": f"call {turn}"}, {"role": "tool", "content": "y" * 1000}]
    return records


def _stored_plain(run_dir: Path, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The lines `records` are stored as, uncompressed (to measure what is stored once by itself;
    compression is tested below), having checked that they read back as written."""
    writer = RecordWriter(run_dir / "records-main.jsonl", "run-1", "0" * 64)
    for record in records:
        writer.write(record)
    writer.close(compress=False)
    assert list(iter_records(run_dir)) == records
    return [json.loads(line) for line in (run_dir / "records-main.jsonl").read_text().splitlines()]


def test_a_conversation_is_stored_once_and_read_back_whole(tmp_path: Path) -> None:
    first, second = conversation("a", 6), conversation("b", 6)
    # Two conversations interleaved, as concurrent tasks write them; then one that does not continue.
    written = [record for pair in zip(first, second, strict=True) for record in pair]
    written.append(response("a", "other", [{"role": "user", "content": "unrelated"}], temperature=0.5))
    raw = _stored_plain(tmp_path, written)
    continued = [record for record in raw if MESSAGES_FROM in record["request"]]
    assert len(continued) == 10
    assert all(record["request"][SAME_AS_BEFORE] == ["model", "tools"] for record in continued)
    assert all(len(record["request"]["messages"]) == 2 for record in continued)
    # Without the history repeated, six turns take about what the history once takes per turn, not its square.
    naive = sum(len(json.dumps(record)) for record in written)
    stored = (tmp_path / "records-main.jsonl").stat().st_size
    assert stored * 3 < naive


def test_resume_finds_responses_of_compact_records(tmp_path: Path) -> None:
    writer = RecordWriter(tmp_path / "records-main.jsonl", "run-1", "0" * 64)
    records = conversation("a", 3)
    for record in records:
        writer.write(record)
    writer.close()
    index = ResumeIndex(tmp_path)
    found = index.get(("agentic_coding", "a", 0, "turn-003"), "a-turn-003")
    assert found is not None and found["response"] == records[2]["response"]


def test_a_record_whose_predecessor_is_gone_keeps_its_reference(tmp_path: Path) -> None:
    writer = RecordWriter(tmp_path / "records-main.jsonl", "run-1", "0" * 64)
    for record in conversation("a", 3):
        writer.write(record)
    writer.close(compress=False)
    path = tmp_path / "records-main.jsonl"
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], lines[2]]) + "\n")
    third = list(iter_records(tmp_path))[1]
    assert third["request"][MESSAGES_FROM]["step"] == "turn-002"


def test_a_closed_records_file_is_compressed_and_read_back_the_same(tmp_path: Path) -> None:
    records = [record for name in "abcd" for record in conversation(name, 8)]
    writer = RecordWriter(tmp_path / "records-main.jsonl", "run-1", "0" * 64)
    for record in records:
        writer.write(record)
    writer.close(compress=False)
    plain = (tmp_path / "records-main.jsonl").stat().st_size
    compressed = compress_records(tmp_path / "records-main.jsonl")
    assert compressed.name == "records-main.jsonl.zst"
    assert not (tmp_path / "records-main.jsonl").exists()
    assert compressed.stat().st_size * 4 < plain
    assert list(iter_records(tmp_path)) == records
    # A resumed run's index reads the compressed file by decompressed offset.
    found = ResumeIndex(tmp_path).get(("agentic_coding", "c", 0, "turn-005"), "c-turn-005")
    assert found is not None and found["response"] == records[2 * 8 + 4]["response"]


def test_resume_expands_the_records_and_appends_to_them(tmp_path: Path) -> None:
    writer = RecordWriter(tmp_path / "records-main.jsonl", "run-1", "0" * 64)
    first = conversation("a", 3)
    for record in first:
        writer.write(record)
    writer.close()
    assert [path.name for path in record_files(tmp_path)] == ["records-main.jsonl.zst"]
    expand_records(tmp_path)
    assert [path.name for path in tmp_path.iterdir()] == ["records-main.jsonl"]
    writer = RecordWriter(tmp_path / "records-main.jsonl", "run-1", "0" * 64)
    later = conversation("b", 2)
    for record in later:
        writer.write(record)
    writer.close()
    assert list(iter_records(tmp_path)) == first + later


def test_where_both_forms_exist_the_plain_one_is_read(tmp_path: Path) -> None:
    # Compressing was interrupted after the rename (or a resume after expanding): the plain file
    # holds everything the compressed one does, and more if the run went on.
    writer = RecordWriter(tmp_path / "records-main.jsonl", "run-1", "0" * 64)
    records = conversation("a", 4)
    for record in records[:2]:
        writer.write(record)
    writer.close()
    writer = RecordWriter(tmp_path / "records-main.jsonl", "run-1", "0" * 64)
    for record in records:
        writer.write(record)
    writer.close(compress=False)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["records-main.jsonl", "records-main.jsonl.zst"]
    assert list(iter_records(tmp_path)) == records


def test_a_compressed_file_cut_short_ends_at_its_last_whole_record(tmp_path: Path) -> None:
    # Over a megabyte of text that does not compress away: zstd writes it in blocks of 128 KiB,
    # and the blocks before the cut are read.
    random = Random(7)
    records = [
        response(f"item-{index}", "turn-001", [{"role": "user", "content": random.randbytes(2048).hex()}])
        for index in range(300)
    ]
    writer = RecordWriter(tmp_path / "records-main.jsonl", "run-1", "0" * 64)
    for record in records:
        writer.write(record)
    writer.close()
    path = tmp_path / "records-main.jsonl.zst"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    read = list(iter_records(tmp_path))
    assert 0 < len(read) < len(records)
    assert read == records[: len(read)]


def test_a_plain_file_compressed_after_it_was_listed_is_read_compressed(tmp_path: Path) -> None:
    # An xdist worker compresses its file as its session ends, while the controller reads the records.
    writer = RecordWriter(tmp_path / "records-gw0.jsonl", "run-1", "0" * 64)
    records = conversation("a", 3)
    for record in records:
        writer.write(record)
    writer.close(compress=False)
    (listed,) = record_files(tmp_path)
    stored = list(iter_lines(listed))
    compress_records(listed)
    assert not listed.exists()
    assert list(iter_lines(listed)) == stored and len(stored) == len(records)


def test_a_prompt_asked_for_several_samples_is_stored_once(tmp_path: Path) -> None:
    # A long-context item asked 18 times: the prompt is the same, the seed is not.
    prompts = {item: [{"role": "user", "content": f"{item} " + "haystack " * 5000}] for item in ("a", "b")}
    written = [
        {**response(item, "answer", prompts[item], seed=sample), "suite": "long_context_128k", "sample": sample}
        for sample in range(18)
        for item in ("b", "a")
    ]
    raw = _stored_plain(tmp_path, written)
    whole = [record for record in raw if MESSAGES_FROM not in record["request"]]
    assert [(record["item"], record["sample"]) for record in whole] == [("b", 0), ("a", 0)]
    assert all(
        record["request"][MESSAGES_FROM] == {"sample": 0, "step": "answer", "count": 1}
        and record["request"]["messages"] == []
        and record["request"]["seed"] == record["sample"]
        for record in raw
        if record not in whole
    )
    assert (tmp_path / "records-main.jsonl").stat().st_size * 10 < sum(len(json.dumps(record)) for record in written)


def _random_records(random: Random) -> list[dict[str, Any]]:
    """Conversations of two items over three samples, interleaved as concurrent requests write
    them: a turn adds to the history, or starts over, or asks what another sample asked."""
    histories: dict[tuple[str, int], list[dict[str, Any]]] = {}
    turns: dict[tuple[str, int], int] = {}
    records = []
    for _ in range(random.randrange(1, 40)):
        item, sample = random.choice("ab"), random.randrange(3)
        turn = turns.get((item, sample), 0) + 1
        turns[item, sample] = turn
        history = histories.get((item, sample), [])
        choice = random.random()
        if choice < 0.5:
            history = [*history, {"role": "tool", "content": random.choice(("x", "y", "z")) * 50}]
        elif choice < 0.8:
            history = [{"role": "user", "content": f"task {item} turn {turn}"}]
        else:
            history = [{"role": "user", "content": f"task {item} " + random.choice(("p", "q")) * 50}]
        histories[item, sample] = history
        extra = {"seed": random.randrange(2)} if random.random() < 0.5 else {}
        records.append({**response(item, f"turn-{turn:03d}", list(history), **extra), "sample": sample})
    return records


def test_any_records_read_back_as_written_across_resumes() -> None:
    """Whatever a run writes (histories that grow or start over, prompts another sample asked,
    sessions resumed on the same file, compressed or not), reading gives it back exactly."""
    for seed in range(300):
        random = Random(seed)
        records = _random_records(random)
        with tempfile.TemporaryDirectory() as folder:
            run_dir = Path(folder)
            writer = RecordWriter(run_dir / "records-main.jsonl", "run-1", "0" * 64)
            for record in records:
                writer.write(record)
                if random.random() < 0.1:
                    writer.close(compress=random.random() < 0.5)
                    expand_records(run_dir)
                    writer = RecordWriter(run_dir / "records-main.jsonl", "run-1", "0" * 64)
            writer.close(compress=random.random() < 0.5)
            assert list(iter_records(run_dir)) == records, seed
