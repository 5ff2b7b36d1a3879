"""The repetition detector on real outputs of a real model (fixtures/repetition/real_smollm2.json:
SmolLM2-135M-Instruct on llama.cpp answering the small-model suite, labelled by reading; how,
in benchmarks/real_loop_corpus.py). What holds there is asserted: no output read as healthy
is flagged, and everything flagged was read as a loop. Recall is not asserted: the detector
misses most of the real model's counter loops ("12. house 4"), and the figure is printed by
the benchmark and stated in docs/real-engine.md.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from run_files import REPO

from k3conformance.scoring.repetition import detect

CORPUS = REPO / "fixtures" / "repetition" / "real_smollm2.json"
ITEMS: list[dict[str, Any]] = json.loads(CORPUS.read_text(encoding="utf-8"))["items"]


def test_corpus_holds_loops_and_healthy_outputs() -> None:
    labels = [item["label"] for item in ITEMS]
    assert set(labels) == {"loop", "healthy"}
    assert all(item["why"] for item in ITEMS if item["label"] == "loop")


@pytest.mark.parametrize("item", [item for item in ITEMS if item["label"] == "healthy"], ids=lambda item: item["id"])
def test_real_healthy_output_is_not_flagged(item: dict[str, Any]) -> None:
    report = detect(item["text"])
    assert not report.looping, (report.kind, report.loop_block)


def test_some_real_loops_are_found() -> None:
    flagged = [item["id"] for item in ITEMS if item["label"] == "loop" and detect(item["text"]).looping]
    assert flagged, "the detector found none of the real model's loops"
