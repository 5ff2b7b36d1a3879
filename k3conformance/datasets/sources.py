"""Where a suite's items come from, named by a spec string:

    fixture:NAME                 the bundled fixtures/NAME.json
    pool:NAME                    the bundled item pool fixtures/pools/NAME/ (pools.py: real items with provenance)
    hub:NAME[:CONFIG][@SPLIT]    a Hugging Face Hub dataset (split "test" unless given)
    file:PATH                    a local .json, .jsonl or .parquet file

Every loader returns the same shape, `{"id", "prompt", "answer"}` per item, with a
revision (content hash, or the Hub's commit) so two runs can be shown to use the same
data. Anything that stops the data from loading (offline and not cached, a missing file,
records without the expected fields) is one `DatasetUnavailable` whose message says what
to do, never a traceback from deep inside `datasets`.

`datasets` takes seconds to import, so it is imported only for hub: and file: specs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from k3conformance.datasets.bundled import load_fixture
from k3conformance.datasets.pools import PoolUnavailable, load_pool

__all__ = [
    "AIME_FIELDS",
    "GENERIC_FIELDS",
    "GSM8K_FIELDS",
    "MATH500_FIELDS",
    "DatasetSpec",
    "DatasetUnavailable",
    "FieldMap",
    "LoadedDataset",
    "default_fields",
    "load_dataset_items",
    "parse_dataset_spec",
]

SpecKind = Literal["fixture", "pool", "hub", "file"]

DEFAULT_HUB_SPLIT = "test"  # evaluation data: a spec without @SPLIT means the test split
FILE_SUFFIXES = {".json": "json", ".jsonl": "json", ".parquet": "parquet"}

_FIXTURE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_HUB_PART = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
_HUB_NAME = re.compile(rf"{_HUB_PART}(?:/{_HUB_PART})?")
_HUB_CONFIG = re.compile(_HUB_PART)
_HUB_SPLIT = re.compile(r"[A-Za-z0-9_.\-\[\]:%+]+")  # also `datasets` slicing: test[:100]
_COMMIT = re.compile(r"^[0-9a-f]{40}$")

SPEC_FORMS = "fixture:NAME, pool:NAME, hub:NAME[:CONFIG][@SPLIT] or file:PATH (.json, .jsonl, .parquet)"
MATH_OPTION = "--k3-math-dataset"
# What each option can be set to instead: data that is always there, and a local file.
_ALTERNATIVES = {
    MATH_OPTION: ("fixture:math", "file:/path/to/gsm8k.jsonl"),
    "--k3-coding-dataset": ("fixture:coding", "file:/path/to/tasks.jsonl"),
}


class DatasetUnavailable(Exception):
    """The data a spec names cannot be loaded here; the message says what to do instead."""


@dataclass(frozen=True)
class DatasetSpec:
    kind: SpecKind
    name: str  # the fixture's name, the Hub repository id, or the file's path
    config: str | None = None  # hub only
    split: str | None = None  # hub only

    def __str__(self) -> str:
        if self.kind != "hub":
            return f"{self.kind}:{self.name}"
        config = f":{self.config}" if self.config else ""
        return f"hub:{self.name}{config}@{self.split}"


@dataclass(frozen=True)
class FieldMap:
    """Which source fields hold an item's id, problem text and gold answer."""

    id: str | None  # None: the row's index in the split (GSM8K has no id column)
    prompt: str
    answer: str
    # GSM8K's answer field is a worked solution ending "#### 72": the gold is what follows.
    answer_after: str | None = None
    # Further source fields copied into each item unchanged (a coding task's tests, say).
    extra: tuple[str, ...] = field(default=())


GENERIC_FIELDS = FieldMap(id="id", prompt="prompt", answer="answer")
GSM8K_FIELDS = FieldMap(id=None, prompt="question", answer="answer", answer_after="####")
MATH500_FIELDS = FieldMap(id="unique_id", prompt="problem", answer="answer")
# AIME sets on the Hub (e.g. HuggingFaceH4/aime_2024) use problem/answer with an id column.
AIME_FIELDS = FieldMap(id="id", prompt="problem", answer="answer")


@dataclass(frozen=True)
class LoadedDataset:
    name: str  # the spec, as text: "fixture:math", "hub:openai/gsm8k:main@test", ...
    revision: str  # the Hub commit or fingerprint, else the SHA-256 of the file's bytes
    items: list[dict[str, Any]]


# ---------------------------------------------------------------------------
# Parsing


def parse_dataset_spec(text: str) -> DatasetSpec:
    """A spec string -> DatasetSpec; argparse.ArgumentTypeError on anything malformed."""
    kind, separator, rest = text.strip().partition(":")
    if not separator or not rest.strip():
        raise argparse.ArgumentTypeError(f"expected a dataset spec ({SPEC_FORMS}), got {text!r}")
    rest = rest.strip()
    if kind == "fixture":
        return _parse_fixture(text, rest)
    if kind == "pool":
        if not _FIXTURE_NAME.fullmatch(rest):
            raise argparse.ArgumentTypeError(f"expected pool:NAME with NAME a folder in fixtures/pools/, got {text!r}")
        return DatasetSpec("pool", rest)
    if kind == "hub":
        return _parse_hub(text, rest)
    if kind == "file":
        return _parse_file(text, rest)
    raise argparse.ArgumentTypeError(f"unknown dataset kind {kind!r} in {text!r}: expected {SPEC_FORMS}")


def _parse_fixture(text: str, name: str) -> DatasetSpec:
    if not _FIXTURE_NAME.fullmatch(name):
        raise argparse.ArgumentTypeError(
            f"expected fixture:NAME with NAME a file in fixtures/ without .json (e.g. fixture:math), got {text!r}"
        )
    return DatasetSpec("fixture", name)


def _parse_hub(text: str, rest: str) -> DatasetSpec:
    # The split goes first: `datasets` slicing (test[:100]) may itself contain ':'.
    repository, at, split = rest.partition("@")
    name, colon, config = repository.partition(":")
    problems = []
    if not _HUB_NAME.fullmatch(name):
        problems.append(f"dataset name {name!r} is not OWNER/NAME or NAME")
    if colon and not _HUB_CONFIG.fullmatch(config):
        problems.append(f"config {config!r} is empty or has characters a config name cannot")
    if at and not _HUB_SPLIT.fullmatch(split):
        problems.append(f"split {split!r} is empty or has characters a split cannot")
    if problems:
        raise argparse.ArgumentTypeError(
            f"expected hub:NAME[:CONFIG][@SPLIT] (e.g. hub:openai/gsm8k:main@test), got {text!r}: "
            + "; ".join(problems)
        )
    return DatasetSpec("hub", name, config or None, split if at else DEFAULT_HUB_SPLIT)


def _parse_file(text: str, path_text: str) -> DatasetSpec:
    path = Path(path_text).expanduser()
    if path.suffix.lower() not in FILE_SUFFIXES:
        raise argparse.ArgumentTypeError(f"expected file:PATH ending in .json, .jsonl or .parquet, got {text!r}")
    return DatasetSpec("file", str(path))


# ---------------------------------------------------------------------------
# Loading


def default_fields(spec: DatasetSpec) -> FieldMap:
    """The field names of the datasets we know by name; id/prompt/answer otherwise."""
    lowered = spec.name.lower()
    if "gsm8k" in lowered:
        return GSM8K_FIELDS
    if "math-500" in lowered or "math500" in lowered:
        return MATH500_FIELDS
    if "aime" in lowered:
        return AIME_FIELDS
    return GENERIC_FIELDS


def load_dataset_items(
    spec: DatasetSpec | str,
    *,
    limit: int | None = None,
    fields: FieldMap | None = None,
    option: str = MATH_OPTION,
    cache_dir: str | None = None,
) -> LoadedDataset:
    """The first `limit` items (all when None) of the data `spec` names, normalised to
    {"id", "prompt", "answer"} (plus `fields.extra`; None: `default_fields(spec)`).

    `option` is the command-line option that chose the spec: DatasetUnavailable's message
    tells the user what to set it to instead. `cache_dir` is passed to `datasets`.
    """
    parsed = parse_dataset_spec(spec) if isinstance(spec, str) else spec
    field_map = fields or default_fields(parsed)
    try:
        if parsed.kind == "fixture":
            rows, revision = _fixture_rows(parsed)
        elif parsed.kind == "pool":
            rows, revision = _pool_rows(parsed)
        elif parsed.kind == "hub":
            rows, revision = _hub_rows(parsed, limit, cache_dir)
        else:
            rows, revision = _file_rows(parsed, limit, cache_dir)
        items = _normalise(rows, field_map, limit)
    except _Unavailable as problem:
        raise DatasetUnavailable(f"dataset {parsed} is unavailable: {problem}; {_what_to_do(option)}") from None
    return LoadedDataset(str(parsed), revision, items)


class _Unavailable(Exception):
    """Why the data cannot be loaded; load_dataset_items adds the spec and the remedy."""


def _what_to_do(option: str) -> str:
    fixture, local_file = _ALTERNATIVES.get(option, ("fixture:NAME", "file:/path/to/data.jsonl"))
    return f"set {option} to {fixture} or to a local file: {option} {local_file}"


def _fixture_rows(spec: DatasetSpec) -> tuple[list[Mapping[str, Any]], str]:
    try:
        fixture = load_fixture(spec.name)
    except FileNotFoundError as error:
        raise _Unavailable(str(error)) from None
    return list(fixture.items), fixture.sha256


def _pool_rows(spec: DatasetSpec) -> tuple[list[Mapping[str, Any]], str]:
    try:
        pool = load_pool(spec.name)
    except PoolUnavailable as error:
        raise _Unavailable(str(error)) from None
    return list(pool.items), pool.sha256


def _import_datasets() -> Any:
    try:
        import datasets
    except ImportError:
        raise _Unavailable("the `datasets` package is not installed (pip install datasets)") from None
    return datasets


def _hub_rows(spec: DatasetSpec, limit: int | None, cache_dir: str | None) -> tuple[list[Mapping[str, Any]], str]:
    datasets = _import_datasets()
    try:
        dataset = datasets.load_dataset(spec.name, spec.config, split=spec.split, cache_dir=cache_dir)
    except Exception as error:
        # Offline and not cached is a ConnectionError; a wrong name, DatasetNotFoundError;
        # a wrong config or split, ValueError. All mean the same to the run: no data.
        raise _Unavailable(_hub_reason(error)) from None
    return _first_rows(dataset, limit), _hub_revision(dataset)


def _hub_reason(error: Exception) -> str:
    detail = " ".join(str(error).split())[:300]
    hint = ""
    if isinstance(error, ConnectionError):
        hint = " (no network, or HF_DATASETS_OFFLINE=1, and not in the local cache)"
    return f"{type(error).__name__}: {detail}{hint}"


def _hub_revision(dataset: Any) -> str:
    # The cache path holds the Hub commit the data came from (.../0.0.0/<sha>/...);
    # the fingerprint identifies the content when the path says nothing.
    for cache_file in getattr(dataset, "cache_files", None) or ():
        for part in Path(str(cache_file.get("filename", ""))).parts:
            if _COMMIT.match(part):
                return part
    return str(getattr(dataset, "_fingerprint", "unknown"))


def _file_rows(spec: DatasetSpec, limit: int | None, cache_dir: str | None) -> tuple[list[Mapping[str, Any]], str]:
    path = Path(spec.name)
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise _Unavailable(f"cannot read {path} ({error.strerror})") from None
    datasets = _import_datasets()
    builder = FILE_SUFFIXES[path.suffix.lower()]
    options: dict[str, Any] = {}
    if path.suffix.lower() == ".json" and _is_fixture_document(raw):
        options["field"] = "items"  # a file in the fixtures' own format
    try:
        dataset = datasets.load_dataset(builder, data_files=str(path), split="train", cache_dir=cache_dir, **options)
    except Exception as error:
        detail = " ".join(str(error).split())[:300]
        raise _Unavailable(f"{path} is not readable as {builder} ({type(error).__name__}: {detail})") from None
    return _first_rows(dataset, limit), hashlib.sha256(raw).hexdigest()


def _is_fixture_document(raw: bytes) -> bool:
    try:
        document = json.loads(raw)
    except ValueError:
        return False  # JSON lines, or broken: `datasets` will say which
    return isinstance(document, dict) and isinstance(document.get("items"), list)


def _first_rows(dataset: Any, limit: int | None) -> list[Mapping[str, Any]]:
    count = len(dataset) if limit is None else min(limit, len(dataset))
    return list(dataset.select(range(count)))


def _normalise(rows: Iterable[Mapping[str, Any]], fields: FieldMap, limit: int | None) -> list[dict[str, Any]]:
    items = []
    for index, row in enumerate(rows):
        if limit is not None and index >= limit:
            break
        items.append(_normalise_row(index, row, fields))
    return items


def _normalise_row(index: int, row: Mapping[str, Any], fields: FieldMap) -> dict[str, Any]:
    wanted = [name for name in (fields.id, fields.prompt, fields.answer, *fields.extra) if name is not None]
    missing = [name for name in wanted if name not in row]
    if missing:
        raise _Unavailable(
            f"record {index} has no field {', '.join(map(repr, missing))} "
            f"(it has {', '.join(map(repr, sorted(row)))}); the data needs {', '.join(map(repr, wanted))}",
        )
    answer = str(row[fields.answer])
    if fields.answer_after is not None:
        answer = answer.rpartition(fields.answer_after)[2].strip()
    item: dict[str, Any] = {
        "id": str(index) if fields.id is None else str(row[fields.id]),
        "prompt": str(row[fields.prompt]),
        "answer": answer,
    }
    item.update({name: row[name] for name in fields.extra})
    return item
