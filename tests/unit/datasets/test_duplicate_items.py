"""Duplicate item ids (issue 21, reproduction 2): `--k3-math-dataset fixture:math,fixture:math`
was merged silently, each item scored as one with twice the samples, and passed the gate on 8."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from k3conformance.datasets.suite_items import DatasetUnavailable, check_datasets


@dataclass(frozen=True)
class Options:
    math_dataset: tuple[str, ...]
    coding_dataset: tuple[str, ...] = ("fixture:coding",)
    limit: int | None = None
    prompt_token_cases: Path | None = None


def test_a_dataset_named_twice_is_refused() -> None:
    with pytest.raises(DatasetUnavailable, match=r"--k3-math-dataset: item id .* occurs twice \(in fixture:math\)"):
        check_datasets(Options(("fixture:math", "fixture:math")))


def test_two_files_with_one_id_each_are_two_items(tmp_path: Path) -> None:
    """Items of other math datasets are named by their dataset: the same raw id is no duplicate."""
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    first.write_text('{"id": "p1", "prompt": "1 + 1?", "answer": "2"}\n')
    second.write_text('{"id": "p1", "prompt": "2 + 2?", "answer": "4"}\n')
    assert len(check_datasets(Options((f"file:{first}", f"file:{second}")))["math"]) == 2


def test_one_file_with_a_repeated_id_is_refused(tmp_path: Path) -> None:
    problems = tmp_path / "p.jsonl"
    problems.write_text(
        '{"id": "p1", "prompt": "1 + 1?", "answer": "2"}\n{"id": "p1", "prompt": "x?", "answer": "3"}\n'
    )
    with pytest.raises(DatasetUnavailable, match="item id 'file:"):
        check_datasets(Options((f"file:{problems}",)))
