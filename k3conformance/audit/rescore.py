"""The suites whose score the audit can recompute from a response alone, with the suite's own scorer.

Each rescorer takes what the run's outcome record kept of one sample (its `gold`) and a response's
content, and returns the score the suite would give (1.0 or 0.0), or None when the record lacks
what it needs. The audit rescores the stored response too: an item whose stored response does not
rescore to its recorded score is left out (a scorer that changed since the run), counted.

Suites not here are skipped, each with why (`SKIPPED_WHY`): coding's score needs its code run in
the sandbox, the agentic suite's a conversation of many turns, and the conformance suites have
checks, not scores (at temperature 0 their exchanges are still compared bit for bit).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import cache
from typing import Any

from k3conformance.datasets.long_tasks import KINDS, answer_pattern
from k3conformance.datasets.small_model_items import GENERATOR_SEED, LONG_RULES, generate_items
from k3conformance.scoring.long_answers import score_long_answer
from k3conformance.scoring.math_answers import score_gsm8k, score_math

Rescorer = Callable[[str, Mapping[str, Any], "str | None"], "float | None"]

LONG_CONTEXT_PREFIX = "long_context"
SKIPPED_WHY = {
    "coding": "its score needs the model's code run against hidden tests in the sandbox",
    "agentic_coding": "its score is a whole agent conversation of many turns, run in the sandbox",
}
NO_SCORE_WHY = "no score to recompute (a conformance suite: checks, not scores)"


def _math(item: str, detail: Mapping[str, Any], content: str | None) -> float | None:
    gold = detail.get("gold")
    return float(score_math(str(gold), content).correct) if gold is not None else None


@cache
def _small_model_rules() -> dict[str, str]:
    return {item.id: LONG_RULES.get(item.kind, "last-number") for item in generate_items(GENERATOR_SEED)}


def _small_model(item: str, detail: Mapping[str, Any], content: str | None) -> float | None:
    gold, rule = detail.get("gold"), _small_model_rules().get(item)
    if gold is None or rule is None:
        return None
    if rule == "last-number":
        return float(score_gsm8k(str(gold), content)["flexible"].correct)
    return float(score_long_answer(rule, str(gold), content).correct)


def _long_context(item: str, detail: Mapping[str, Any], content: str | None) -> float | None:
    gold = detail.get("gold")
    _, _, index = item.rpartition("-")
    if gold is None or not index.isdigit():
        return None
    expected = sorted(str(gold).split(", "))
    named = sorted(set(answer_pattern(KINDS[int(index) % len(KINDS)]).findall(content or "")))
    return float(named == expected)


def rescorer_for(suite: str) -> Rescorer | None:
    if suite == "math":
        return _math
    if suite == "small_model":
        return _small_model
    if suite.startswith(LONG_CONTEXT_PREFIX):
        return _long_context
    return None
