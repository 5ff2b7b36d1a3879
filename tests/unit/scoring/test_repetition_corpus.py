"""The repetition detector on the labelled corpus (fixtures/repetition/corpus.json): no
healthy text flagged, every periodic loop found with its kind and place; the figures are
printed by benchmarks/repetition_corpus.py and quoted in docs/gating.md."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import fields
from typing import Any

import pytest
from run_files import REPO

from k3conformance.scoring.repetition import LoopVerdict, detect, judge

CORPUS = REPO / "fixtures" / "repetition" / "corpus.json"
ITEMS: list[dict[str, Any]] = json.loads(CORPUS.read_text(encoding="utf-8"))["items"]


def test_corpus_is_what_the_builder_builds() -> None:
    spec = importlib.util.spec_from_file_location(
        "build_repetition_corpus", REPO / "fixtures" / "repetition" / "build_corpus.py"
    )
    assert spec is not None and spec.loader is not None
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    assert builder.build() == ITEMS


def test_corpus_covers_every_label() -> None:
    labels = {item["label"] for item in ITEMS}
    assert labels == {"healthy", "short-token", "block", "counter", "escaped", "unspaced"}
    escaped_shapes = {item["shape"] for item in ITEMS if item["label"] == "escaped"}
    assert escaped_shapes == {"short-token", "block", "counter", "unspaced"}
    assert sum(item["label"] == "healthy" for item in ITEMS) >= 60


@pytest.mark.parametrize("item", [item for item in ITEMS if item["label"] == "healthy"], ids=lambda item: item["id"])
def test_healthy_text_is_not_flagged(item: dict[str, Any]) -> None:
    report = detect(item["text"])
    assert not report.looping, (report.kind, report.loop_block)


@pytest.mark.parametrize(
    "item",
    [item for item in ITEMS if item["label"] != "healthy" and not item.get("irregular")],
    ids=lambda item: item["id"],
)
def test_loop_is_found_with_its_kind(item: dict[str, Any]) -> None:
    report = detect(item["text"])
    assert report.looping
    assert report.kind == item["shape"]
    assert report.escaped == (item["label"] == "escaped")
    assert report.tail_loop == (item["label"] != "escaped")
    assert 0 <= report.loop_start < len(item["text"]) and report.loop_chars > 0


@pytest.mark.parametrize("item", ITEMS, ids=lambda item: item["id"])
def test_the_verdict_alone_is_the_verdict_with_evidence(item: dict[str, Any]) -> None:
    """The agent loop judges turns with `judge`, which skips the evidence: on every text of
    the corpus it must say what `detect` says."""
    report = detect(item["text"])
    assert judge(item["text"]) == LoopVerdict(
        **{field.name: getattr(report, field.name) for field in fields(LoopVerdict)}
    )
