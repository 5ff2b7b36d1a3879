"""The repetition detector on real outputs of a real model (fixtures/repetition/real_smollm2.json:
SmolLM2-135M-Instruct on llama.cpp answering the small-model suite, labelled by reading; how,
in benchmarks/real_loop_corpus.py). What holds there is asserted: no output read as healthy
is flagged, everything flagged was read as a loop, and the loops of the shapes the detector
learnt from this corpus (one word and a counter, "12. house 4"; a word and a number, "Cat 3:")
are found. The recall, 14 of 19, is printed by the benchmark and stated in docs/real-engine.md;
the 5 missed are two or five copies, an irregular cycle or counters that skip.
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


# The real loops of one word and a counter, and of a word and a number (issue 22: missed before).
LEARNT = ("repeat-word-003", "repeat-word-009", "repeat-word-020", "list-things-023", "repeat-word-013")


def test_the_real_loops_of_the_learnt_shapes_are_found() -> None:
    by_id = {item["id"]: item for item in ITEMS}
    assert all(by_id[name]["label"] == "loop" for name in LEARNT)
    missed = [name for name in LEARNT if not detect(by_id[name]["text"]).looping]
    assert missed == []
    flagged = [item["id"] for item in ITEMS if item["label"] == "loop" and detect(item["text"]).looping]
    assert len(flagged) >= 14, flagged
