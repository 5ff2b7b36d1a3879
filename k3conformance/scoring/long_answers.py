"""Scoring the long answers of the small-model suite (suites/test_small_model.py): runs of
numbers, runs of words, lists of distinct lines and a word written a given number of times.
Each rule is strict about the end of the answer, because that is where a model that does
not stop, or loops, goes wrong: a run that goes on past its end, a cycle that comes round
again, a list with a line repeated, a word written too often are all wrong.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from k3conformance.datasets.small_model_items import DAYS

__all__ = [
    "LongScore",
    "score_distinct_lines",
    "score_long_answer",
    "score_number_run",
    "score_word_count",
    "score_word_run",
]

_INTEGER = re.compile(r"-?\d+")
# A list item's marker: "1.", "2)", "-", "*", "•".
_MARKER = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s*")


@dataclass(frozen=True)
class LongScore:
    correct: bool
    # What the response gave, counted in the rule's unit (numbers, words, lines); 0: nothing.
    given: int


def score_number_run(gold: str, response: str | None) -> LongScore:
    """The integers of the response must end with the expected run: a preamble that names
    the bounds ("the even numbers from 2 to 40 are: 2, 4, …") is allowed, as the math
    suite's last-number rule allows working before the answer; numbers after the run are not."""
    expected = [int(text) for text in _INTEGER.findall(gold)]
    given = [int(text) for text in _INTEGER.findall(response or "")]
    return LongScore(len(given) >= len(expected) and given[len(given) - len(expected) :] == expected, len(given))


def score_word_run(gold: str, vocabulary: tuple[str, ...], response: str | None) -> LongScore:
    """The words of `vocabulary` the response names, in order, must be exactly `gold`'s."""
    pattern = re.compile(r"\b(" + "|".join(vocabulary) + r")\b", re.IGNORECASE)
    expected = [word.lower() for word in gold.split(", ")]
    given = [match.lower() for match in pattern.findall(response or "")]
    return LongScore(given == expected, len(given))


def score_distinct_lines(count: int, response: str | None) -> LongScore:
    """Exactly `count` list items, all different. When some lines carry a list marker
    ("1.", "-") only those are items, so a closing remark is not one; otherwise every
    non-empty line is, but a heading ending in ':'."""
    lines = [line for line in (response or "").splitlines() if line.strip()]
    marked = [line for line in lines if _MARKER.match(line)]
    chosen = marked or [line for line in lines if not line.rstrip().endswith(":")]
    items = [_MARKER.sub("", line).strip().lower() for line in chosen]
    return LongScore(len(items) == count and len(set(items)) == count, len(items))


def score_word_count(word: str, count: int, response: str | None) -> LongScore:
    """The word, as a whole word in any case, exactly `count` times."""
    given = len(re.findall(rf"\b{re.escape(word)}\b", response or "", re.IGNORECASE))
    return LongScore(given == count, given)


def score_long_answer(rule: str, gold: str, response: str | None) -> LongScore:
    """A long small-model answer scored by its item's rule (LONG_RULES): the suite's scorer, and the
    audit's when it rescores an answer asked again (k3conformance/audit/rescore.py)."""
    if rule == "number-run":
        return score_number_run(gold, response)
    if rule == "word-run":
        return score_word_run(gold, DAYS, response)
    if rule == "distinct-lines":
        return score_distinct_lines(int(gold), response)
    word, count = gold.split()
    return score_word_count(word, int(count), response)
