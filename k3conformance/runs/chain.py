"""Records chained to their run: each line carries the run id and a running hash over the lines
before it, anchored in the identity sealed when the run started (identity.json), and the summary
seals each file's head (`records_chain`).

A line is its record as JSON with `"run_id"` in it, closed by `, "chain": "<sha256>"}`: the hash
of the previous line's chain (for the first line, the file's anchor) and of the line's bytes up to
that suffix. The suffix has a fixed length, so a reader finds the hashed bytes without parsing the
line, and the writer hashes each line once, as it writes it: nothing is read back on the request
path. The anchor is the hash of the sealed identity (which names the run id and its start) and of
the file's name (one chain per process, `records-gw0.jsonl`; compressed or not, the same name).

What the chain shows: a line taken from another run, removed, moved or edited breaks the chain
where it stands; a file cut short ends before the head the summary sealed; a file of another run
put in place of this one's starts from another anchor. What it does not: without a key, whoever
rewrites the records can recompute every hash (a signature of the head says who sealed it).

Each live request record also carries a nonce drawn for it (`k3_nonce`): a run whose exchanges
share nonces with another stored run's replayed that run's records.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

IDENTITY_FILE = "identity.json"
CHAIN_KEY = "chain"
NONCE_KEY = "k3_nonce"
_SUFFIX_HEAD = b', "chain": "'
_DIGEST_HEX = 64
# `, "chain": "` + 64 hex digits + `"}` + newline.
SUFFIX_LENGTH = len(_SUFFIX_HEAD) + _DIGEST_HEX + 3
_NONCE_MARK = b'"k3_nonce": "'
_NONCE_HEX = 16
_ANCHOR_TAG = b"k3conformance records chain v1\n"
# Outcome records are written with "kind" first: the many large response lines are hashed, not parsed.
OUTCOME_PREFIX = b'{"kind": "outcome"'

# Per records file (its plain name): {"head": chain of its last line, "records": its line count}.
ChainHeads = dict[str, dict[str, Any]]


def identity_digest(identity: Mapping[str, Any] | None) -> str:
    """The hash of a sealed identity as parsed (key order does not matter)."""
    text = json.dumps(identity, sort_keys=True, ensure_ascii=False, default=str) if identity is not None else ""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def anchor(digest: str, file_name: str) -> str:
    """The chain value before a records file's first line."""
    plain = file_name.removesuffix(".zst")
    return hashlib.sha256(_ANCHOR_TAG + digest.encode() + b"\n" + plain.encode()).hexdigest()


def read_object(path: Path) -> dict[str, Any] | None:
    """The JSON object in `path`; None when there is none, it is unreadable or no object."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def sealed_identity(run_dir: Path) -> dict[str, Any] | None:
    """The identity sealed in `run_dir`; None when there is none or it is unreadable."""
    return read_object(run_dir / IDENTITY_FILE)


def file_anchor(run_dir: Path, file_name: str) -> str:
    """The anchor of a records file of the run in `run_dir`, from its sealed identity."""
    return anchor(identity_digest(sealed_identity(run_dir)), file_name)


def new_nonce() -> str:
    return secrets.token_hex(_NONCE_HEX // 2)


def chained_line(record: Mapping[str, Any], run_id: str, previous: str) -> tuple[str, str]:
    """The line that writes `record` of run `run_id` after a line whose chain is `previous`, and its chain."""
    # The run id goes in as text, not by copying the record: the request path pays one dumps and one hash.
    body = json.dumps(record, ensure_ascii=False, default=str)[:-1] + f', "run_id": {json.dumps(run_id)}'
    digest = hashlib.sha256(previous.encode())
    digest.update(body.encode("utf-8"))
    chain = digest.hexdigest()
    return f'{body}, "{CHAIN_KEY}": "{chain}"}}\n', chain


def chained_lines(records: Iterable[Mapping[str, Any]], run_id: str, start: str) -> Iterator[str]:
    """Every record as chained lines, from the chain value `start` (a file's anchor)."""
    chain = start
    for record in records:
        line, chain = chained_line(record, run_id, chain)
        yield line


def _split(raw: bytes) -> tuple[bytes, str] | None:
    """(the hashed bytes, the chain) of a chained line; None for a line that is not one."""
    if len(raw) <= SUFFIX_LENGTH or not raw.endswith(b'"}\n'):
        return None
    cut = len(raw) - SUFFIX_LENGTH
    if raw[cut : cut + len(_SUFFIX_HEAD)] != _SUFFIX_HEAD:
        return None
    chain = raw[cut + len(_SUFFIX_HEAD) : -3]
    try:
        return raw[:cut], chain.decode("ascii")
    except UnicodeDecodeError:
        return None


def last_chain(lines: Iterable[bytes]) -> tuple[str | None, int]:
    """(the chain of the last chained line, how many chained lines there are): where a resumed
    session's writer continues a file."""
    head, count = None, 0
    for raw in lines:
        parts = _split(raw)
        if parts is not None:
            head, count = parts[1], count + 1
    return head, count


def _run_of(raw: bytes) -> str | None:
    try:
        record = json.loads(raw)
    except ValueError:
        return None
    value = record.get("run_id") if isinstance(record, dict) else None
    return value if isinstance(value, str) else None


@dataclass
class FileCheck:
    """What one records file's chain came to."""

    name: str
    # How many lines chain from the anchor, and those of them that are outcome records, in order.
    count: int = 0
    outcomes: list[bytes] = field(default_factory=list)
    head: str | None = None
    problem: str | None = None
    nonces: set[str] = field(default_factory=set)


def check_file(name: str, raw_lines: Iterable[bytes], start: str, run_id: str, label: str) -> FileCheck:
    """The lines of a records file that chain from `start`, up to the first that does not. A line
    that is no chained line at all (a torn write that a resumed session wrote past) is skipped: it
    is evidence of nothing, and the next line chains from the one before it."""
    result = FileCheck(name)
    chain = start
    number = 0
    for number, raw in enumerate(raw_lines, 1):
        parts = _split(raw)
        if parts is None:
            continue
        hashed, said = parts
        if hashlib.sha256(chain.encode() + hashed).hexdigest() != said:
            other = _run_of(raw)
            if other is not None and other != run_id:
                result.problem = f"records of run {other} inside run {label} ({name} line {number})"
            elif not result.count:
                result.problem = (
                    f"{name} does not start from the run's sealed identity (identity.json edited after the run, "
                    "or the records of another run)"
                )
            else:
                result.problem = (
                    f"{name}: the chain breaks at line {number} (a line removed, moved or edited before it, or "
                    "records of another file)"
                )
            break
        chain = said
        result.count += 1
        if hashed.startswith(OUTCOME_PREFIX):
            result.outcomes.append(hashed + b"}")
        start_of_nonce = hashed.find(_NONCE_MARK)
        if start_of_nonce >= 0:
            begin = start_of_nonce + len(_NONCE_MARK)
            result.nonces.add(hashed[begin : begin + _NONCE_HEX].decode("ascii", "replace"))
    result.head = chain if result.count else None
    return result


def check_heads(files: Mapping[str, FileCheck], sealed: object, label: str) -> list[str]:
    """Whether every file ends at the head the summary sealed for it, and no file is missing or extra."""
    if not isinstance(sealed, Mapping) or not sealed:
        return [
            f"{label}: its summary seals no records chain (records_chain): nothing binds its records to the run "
            "(written by k3conformance before issue 35, or edited); run it again"
        ]
    problems = []
    for name in sorted(files.keys() | sealed.keys()):
        entry, found = sealed.get(name), files.get(name)
        if found is None:
            problems.append(f"{label}: {name}, sealed in its summary, is missing")
            continue
        if found.problem is not None:
            problems.append(f"{label}: {found.problem}")
            continue
        if not isinstance(entry, Mapping):
            problems.append(f"{label}: {name} is not among the records files its summary sealed (mixed in?)")
            continue
        if found.head == entry.get("head"):
            continue
        count = found.count
        expected = entry.get("records")
        if isinstance(expected, int) and count < expected:
            problems.append(
                f"{label}: records cut at line {count + 1} of {name}: they end before the sealed head ({count} of "
                f"{expected} records); the run's evidence is lost: rerun it (a resume cannot bring the lines back)"
            )
        else:
            problems.append(f"{label}: {name} does not end at the head its summary sealed (records of another run?)")
    return problems


@dataclass(frozen=True)
class RunRecords:
    """Every records file of a run, checked against its chain."""

    files: dict[str, FileCheck]

    @property
    def nonces(self) -> set[str]:
        return set().union(*(found.nonces for found in self.files.values()))

    def outcome_lines(self) -> Iterator[bytes]:
        for name in sorted(self.files):
            yield from self.files[name].outcomes
