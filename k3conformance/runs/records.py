"""Run records on disk: one folder per run under `results/<shape>/<run-id>/`.

Each process appends JSON lines to its own `records-<process>.jsonl` and flushes every
line as it is written, so a crash or Ctrl-C loses no finished record; a partial last
line (the process died mid-write) is skipped on reading. The run's `summary.json` is
replaced atomically (write, then rename), so it is never half-written.

A conversation's history is stored once: an agentic turn's request repeats every message of
the turn before it, so a response record whose messages start with the messages of the same
conversation's previous record (same suite, item and sample, in the same file) stores only
the messages it adds, with `messages_from: {"step", "count"}` naming what it continues, and
leaves out the fields equal to that request's (`same_as_before`: the tool schemas, sampling).
Storage then grows with a conversation's length, not with its square. Likewise a prompt is
stored once for all the samples of an item: a response record that continues no conversation
of its own but repeats the messages of the last record of the same suite, item and step that
was stored whole (another sample's: a long-context prompt of 128k tokens asked 18 times) names
it, `messages_from: {"sample", "step", "count"}`. `iter_records` puts the whole request back; a
record whose predecessor is missing (a file cut by hand) keeps its tail and its
`messages_from`. Resuming needs only responses and fingerprints (of the whole
request, taken before it is written), so it reads records either way.

A finished session compresses its records file (`records-<process>.jsonl.zst`, Zstandard at
level 9: about a tenth of the plain size, in well under a second for the quick start's run).
While a run is in progress its records stay plain, line by line, so a crash loses nothing; a
resumed run first expands them back (`expand_records`). Compressing writes the new file whole
before it removes the plain one, so where both exist the plain one holds everything and is the
one read.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import shutil
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any

from k3conformance.runs.chain import CHAIN_KEY, chained_line, last_chain, read_object, sealed_identity
from k3conformance.runs.schema import RunStatus

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

SUMMARY_FILE = "summary.json"
RECORDS_GLOB = "records-*.jsonl"
COMPRESSED_SUFFIX = ".zst"
COMPRESSED_GLOB = RECORDS_GLOB + COMPRESSED_SUFFIX
# zstd's level 9: 10.6x on the quick start's 21.8 MB of records in 0.7 s (level 3: 8.6x; 15: 13.7x in 10.5 s).
COMPRESSION_LEVEL = 9
STATUS_RUNNING: RunStatus = "running"
STATUS_COMPLETE: RunStatus = "complete"
STATUS_INCOMPLETE: RunStatus = "incomplete"
STATUS_INTERRUPTED: RunStatus = "interrupted"

RecordKey = tuple[str, str, int, str]
# What the writer adds to each record to bind it to its run (runs/chain.py).
_BINDING = ("run_id", CHAIN_KEY)
# A stored request that continues the previous request of its conversation.
MESSAGES_FROM = "messages_from"
# The request's other fields (tools, sampling) that are the same as in that previous request.
SAME_AS_BEFORE = "same_as_before"
_Conversation = tuple[str, str, int]
# Per conversation: the step of its last request, and that request.
_History = tuple[str, dict[str, Any]]
# Per suite, item and step: the sample of the last request stored whole there, and that request.
_Step = tuple[str, str, str]
_Root = tuple[int, dict[str, Any]]


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def new_run_id() -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{secrets.token_hex(3)}"


def records_file(run_dir: Path, process: str) -> Path:
    return run_dir / f"records-{process}.jsonl"


def write_json_atomic(path: Path, data: Any) -> None:
    """`path` with `data` as JSON, never seen half-written (an interruption leaves the old file)."""
    text = json.dumps(data, indent=2, sort_keys=True, default=str) + "\n"
    _write_whole(io.BytesIO(text.encode("utf-8")), path, compress=False)


class UnreadableJson(ValueError):
    """A JSON file that cannot be read or parsed; the message names it."""


def read_json(path: Path, what: str) -> Any:
    """The parsed content of `path`, described as `what` in the one message of UnreadableJson."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise UnreadableJson(f"cannot read {what} {path}: {error.strerror or error}") from None
    except ValueError as error:
        raise UnreadableJson(f"{what} {path} is corrupt (not JSON: {error})") from None


def read_summary(run_dir: Path) -> dict[str, Any] | None:
    return read_object(run_dir / SUMMARY_FILE)


class MisfiledRun(ValueError):
    """A run folder whose name is not its run id, or that stands under another shape's folder; the
    message names both."""


def parse_time(text: object) -> datetime | None:
    """An ISO 8601 time as written in summaries (naive ones taken as UTC); None when it is not one."""
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def seconds_ahead(text: object, now: datetime) -> float | None:
    """How many seconds the time `text` lies after `now`; None when it is no time."""
    moment = parse_time(text)
    return None if moment is None else (moment - now).total_seconds()


def newest_run(
    shape_dir: Path, wanted: Callable[[dict[str, Any] | None], bool]
) -> tuple[Path, dict[str, Any] | None] | None:
    """The newest run folder of a shape whose summary (None when it has none or it cannot
    be read) is `wanted`, with that summary. Newest by the start time sealed in its identity
    (else its summary's), never by the folder's name: a folder copied under a later-sorting name
    shadows nothing. A wanted folder whose name is not its run id, or whose run is of another
    shape than its folder, is MisfiledRun."""
    if not shape_dir.is_dir():
        return None
    found: list[tuple[datetime, str, Path, dict[str, Any] | None]] = []
    for run_dir in (p for p in shape_dir.iterdir() if p.is_dir()):
        summary = read_summary(run_dir)
        if not wanted(summary):
            continue
        identity = sealed_identity(run_dir) or {}
        for what, said in (("summary", summary or {}), ("sealed identity", identity)):
            _check_filed(run_dir, what, said)
        started = parse_time(identity.get("started_at")) or parse_time((summary or {}).get("started_at"))
        found.append((started or _NEVER, run_dir.name, run_dir, summary))
    if not found:
        return None
    _, _, run_dir, summary = max(found, key=lambda entry: (entry[0], entry[1]))
    return run_dir, summary


_NEVER = datetime.min.replace(tzinfo=timezone.utc)


def _check_filed(run_dir: Path, what: str, said: Mapping[str, Any]) -> None:
    run_id, shape = said.get("run_id"), said.get("shape")
    if run_id is not None and run_id != run_dir.name:
        raise MisfiledRun(
            f"the run folder {run_dir} is named {run_dir.name!r}, but its {what} says run {run_id!r}: a folder copied "
            "or renamed is not chosen by its name; put it back under its run id, or name the folder you mean"
        )
    if shape is not None and shape != run_dir.parent.name:
        raise MisfiledRun(
            f"the run folder {run_dir} stands under shape {run_dir.parent.name!r}, but its {what} says shape "
            f"{shape!r}: move it under results/{shape}/, or name the folder you mean"
        )


def latest_incomplete_run(shape_dir: Path) -> Path | None:
    """The newest run of a shape that did not finish complete (no summary counts as
    unfinished: the process was killed before writing one)."""
    found = newest_run(shape_dir, lambda summary: summary is None or summary.get("status") != STATUS_COMPLETE)
    return found[0] if found else None


def record_files(run_dir: Path) -> list[Path]:
    """A run's records files, one per process: the plain one where both forms exist (it holds
    everything: see the module's docstring), in the order of their names."""
    plain = {path.name: path for path in run_dir.glob(RECORDS_GLOB)}
    compressed = {
        path.name.removesuffix(COMPRESSED_SUFFIX): path
        for path in run_dir.glob(COMPRESSED_GLOB)
        if path.name.removesuffix(COMPRESSED_SUFFIX) not in plain
    }
    found = {**compressed, **plain}
    return [found[name] for name in sorted(found)]


def open_records(path: Path) -> io.BufferedIOBase:
    """A records file opened for reading its lines, decompressed where it is compressed. A plain file
    that is gone was compressed since it was listed (an xdist worker ends its session while the
    controller reads): its compressed form, written before the plain one was removed, is read."""
    if path.name.endswith(COMPRESSED_SUFFIX):
        return zstd.open(path, "rb")
    try:
        return path.open("rb")
    except FileNotFoundError:
        return zstd.open(path.with_name(path.name + COMPRESSED_SUFFIX), "rb")


def read_records_text(path: Path) -> str:
    """A records file's whole text, decompressed where it is compressed."""
    with open_records(path) as handle:
        return handle.read().decode("utf-8", errors="replace")


def compress_records(path: Path) -> Path:
    """Replace a plain records file by its compressed form (an interruption leaves the plain file,
    which is read first)."""
    target = path.with_name(path.name + COMPRESSED_SUFFIX)
    with path.open("rb") as source:
        _write_whole(source, target, compress=True)
    path.unlink()
    return target


def expand_records(run_dir: Path) -> None:
    """Make every records file of a run plain again, so a resumed run appends to it and finds its
    responses by offset."""
    for path in sorted(run_dir.glob(COMPRESSED_GLOB)):
        plain = path.with_name(path.name.removesuffix(COMPRESSED_SUFFIX))
        if not plain.exists():
            with open_records(path) as source:
                _write_whole(source, plain, compress=False)
        path.unlink()


def _write_whole(source: io.BufferedIOBase, target: Path, *, compress: bool) -> None:
    """`target` with what `source` holds, compressed or not: written whole and synced, then renamed
    into place, so it is never seen half-written."""
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with temporary.open("wb") as raw:
            if compress:
                with zstd.open(raw, "wb", level=COMPRESSION_LEVEL) as sink:
                    shutil.copyfileobj(source, sink, 1 << 20)
            else:
                shutil.copyfileobj(source, raw, 1 << 20)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def iter_whole_lines(path: Path) -> Iterator[bytes]:
    """Every whole line of a records file, decompressed where it is compressed; a file cut short
    (a process killed mid-write, an interrupted copy) or damaged ends at its last whole line."""
    with open_records(path) as handle:
        lines = iter(handle)
        while True:
            try:
                raw = next(lines)
            except (StopIteration, EOFError, zstd.ZstdError):
                return
            if not raw.endswith(b"\n"):
                return
            yield raw


def iter_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(byte offset, record) for every whole, valid line of a records file (offsets into the
    decompressed text of a compressed one)."""
    offset = 0
    for raw in iter_whole_lines(path):
        start, offset = offset, offset + len(raw)
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if isinstance(record, dict):
            yield start, record


def iter_records(run_dir: Path, kind: str | None = None) -> Iterator[dict[str, Any]]:
    """Every record of a run as its writer was given it, a response's request whole again (see the
    module's docstring), without what binds it to the run (runs/chain.py)."""
    for path in record_files(run_dir):
        histories: dict[_Conversation, _History] = {}
        roots: dict[_Step, _Root] = {}
        for _, chained in iter_lines(path):
            record = {key: value for key, value in chained.items() if key not in _BINDING}
            if record.get("kind") == "response":
                record = expand_request(record, histories, roots)
            if kind is None or record.get("kind") == kind:
                yield record


def expand_request(
    record: dict[str, Any], histories: dict[_Conversation, _History], roots: dict[_Step, _Root]
) -> dict[str, Any]:
    """A response record with its whole request, from the earlier records it continues (in file
    order): its conversation's, or another sample's of the same step."""
    request = record.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
        return record
    key = (str(record.get("suite")), str(record.get("item")), int(record.get("sample", 0)))
    step = str(record.get("step"))
    reference = request.get(MESSAGES_FROM)
    if isinstance(reference, dict):
        count = int(reference.get("count", -1))
        if "sample" in reference:
            root = roots.get((key[0], key[1], step))
            earlier = None if root is None or root[0] != reference["sample"] else (step, root[1])
        else:
            earlier = histories.get(key)
        if earlier is None or earlier[0] != reference.get("step") or len(earlier[1]["messages"]) != count:
            return record
        previous = earlier[1]
        whole = {name: previous[name] for name in request.get(SAME_AS_BEFORE) or () if name in previous}
        whole.update({name: value for name, value in request.items() if name not in (MESSAGES_FROM, SAME_AS_BEFORE)})
        whole["messages"] = previous["messages"] + request["messages"]
        request = whole
        record = {**record, "request": whole}
    else:
        roots[key[0], key[1], step] = (key[2], request)
    histories[key] = (step, request)
    return record


def record_key(record: dict[str, Any]) -> RecordKey:
    return (record["suite"], record["item"], int(record["sample"]), record["step"])


class RecordWriter:
    """Appends records of one process; safe to call from the request loop and the test thread.
    Each line is chained to the run (runs/chain.py): it carries `run_id`, and the running hash
    from `start` (the file's anchor); a file that already holds lines (a resumed run) continues
    from its last chained line."""

    def __init__(self, path: Path, run_id: str, start: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.run_id = run_id
        self.head, self.count = start, 0
        if path.exists() and path.stat().st_size:
            last, self.count = last_chain(iter_whole_lines(path))
            self.head = last or start
        self._lock = threading.Lock()
        # Per conversation, the step and request of the last response record written to this file.
        self._histories: dict[_Conversation, _History] = {}
        # Per suite, item and step, the last request written whole to this file (as the reader sees them).
        self._roots: dict[_Step, _Root] = {}
        self._handle: IO[str] = path.open("a", encoding="utf-8")
        if self._handle.tell() > 0 and not _ends_with_newline(path):
            # The last run died mid-line: start ours on a line of its own.
            self._handle.write("\n")

    def write(self, record: Mapping[str, Any]) -> None:
        with self._lock:
            if record.get("kind") == "response":
                record = self._compact(record)
            line, self.head = chained_line(record, self.run_id, self.head)
            self.count += 1
            self._handle.write(line)
            self._handle.flush()

    def _compact(self, record: Mapping[str, Any]) -> Mapping[str, Any]:
        request = record.get("request")
        messages = request.get("messages") if isinstance(request, dict) else None
        if not isinstance(request, dict) or not isinstance(messages, list):
            return record
        key = (str(record.get("suite")), str(record.get("item")), int(record.get("sample", 0)))
        step = str(record.get("step"))
        earlier = self._histories.get(key)
        # Copies: the caller's list may grow with the next turn.
        whole = {**request, "messages": list(messages)}
        self._histories[key] = (step, whole)
        compact = None if earlier is None else _continuing(request, earlier[1], {"step": earlier[0]})
        root = self._roots.get((key[0], key[1], step))
        if compact is None and root is not None:
            compact = _continuing(request, root[1], {"sample": root[0], "step": step})
        if compact is None:
            self._roots[key[0], key[1], step] = (key[2], whole)
            return record
        return {**record, "request": compact}

    def sealed_head(self) -> dict[str, Any]:
        """What the summary seals of this file: its head and how many chained lines it holds."""
        with self._lock:
            return {"head": self.head, "records": self.count}

    def close(self, compress: bool = True) -> None:
        """Close the file and, unless told not to, compress it (see the module's docstring)."""
        with self._lock:
            if self._handle.closed:
                return
            self._handle.close()
            if compress and self.path.exists():
                compress_records(self.path)


def _continuing(
    request: Mapping[str, Any], previous: Mapping[str, Any], reference: Mapping[str, Any]
) -> dict[str, Any] | None:
    """`request` stored as what it adds to `previous` (whose messages it starts with), naming it by
    `reference`; None where it does not start with them."""
    messages, count = request["messages"], len(previous["messages"])
    if not count or len(messages) < count or messages[:count] != previous["messages"]:
        return None
    same = sorted(name for name, value in request.items() if name != "messages" and previous.get(name) == value)
    compact = {name: value for name, value in request.items() if name not in same}
    compact.update(messages=messages[count:], **{MESSAGES_FROM: {**reference, "count": count}})
    if same:
        compact[SAME_AS_BEFORE] = same
    return compact


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"


@dataclass(frozen=True)
class _Location:
    path: Path
    offset: int
    fingerprint: str


class ResumeIndex:
    """Where each finished response of an earlier session lies, so a resumed run reads it
    back instead of sending it again. Only offsets stay in memory, not the outputs."""

    def __init__(self, run_dir: Path) -> None:
        self._locations: dict[RecordKey, _Location] = {}
        for path in record_files(run_dir):
            for offset, record in iter_lines(path):
                if record.get("kind") != "response" or record.get("status") == "infra_error":
                    continue
                self._locations[record_key(record)] = _Location(path, offset, record["fingerprint"])

    def get(self, key: RecordKey, fingerprint: str) -> dict[str, Any] | None:
        location = self._locations.get(key)
        if location is None or location.fingerprint != fingerprint:
            return None
        with open_records(location.path) as handle:
            handle.seek(location.offset)
            record: dict[str, Any] = json.loads(handle.readline())
        return record
