"""The markup detector on a labelled corpus: leaks it must catch, legitimate content it must leave alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from k3conformance.xtml.markup import find_markup

CORPUS = json.loads((Path(__file__).resolve().parents[3] / "fixtures" / "markup" / "corpus.json").read_text())["items"]


def test_precision_and_recall_on_the_labelled_corpus(capsys: pytest.CaptureFixture[str]) -> None:
    flagged = [bool(find_markup(item["text"])) for item in CORPUS]
    labels = [bool(item["markup"]) for item in CORPUS]
    true_positives = sum(f and label for f, label in zip(flagged, labels, strict=True))
    precision = true_positives / max(1, sum(flagged))
    recall = true_positives / sum(labels)
    with capsys.disabled():
        print(f"\nmarkup detector: precision {precision:.2f}, recall {recall:.2f} on {len(CORPUS)} labelled texts")
    wrong = [(item["kind"], item["text"]) for item, f in zip(CORPUS, flagged, strict=True) if f != item["markup"]]
    assert (precision, recall) == (1.0, 1.0), wrong


def test_the_corpus_covers_every_kind_of_leak_and_of_legitimate_content() -> None:
    kinds = {item["kind"] for item in CORPUS}
    leaks = {"cut marker", "stripped XTML", "closer", "K2 section marker", "bare K2 call", "whole marker"}
    legitimate = {"code", "XML", "HTML", "markdown table", "prose", "math", "JSON"}
    assert leaks | legitimate <= kinds


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Paris<|close|", ["<|close|"]),
        ('call tool="get_weather" index="1"', ['call tool="get_weather" index="1"']),
        ("Paris.</response>", ["</response>"]),
        ('functions.get_weather:0{"city": "Paris"}', ["functions.get_weather:0"]),
        ("<response>ok</response>", []),
    ],
)
def test_what_is_reported_names_the_leak(text: str, found: list[str]) -> None:
    assert find_markup(text) == found
