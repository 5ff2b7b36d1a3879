"""The exchanges of a stored run that an audit can ask again: each item's recorded requests, responses
and scores, read from the records that chain from the run's sealed identity (runs/chain.py).

An item is audited when every recorded sample of it is one exchange (the `answer` step, answered:
status ok) of a suite whose score the audit can recompute (rescore.py), and the recorded response
rescores to the score its outcome record holds. The rest is skipped, counted per suite with why.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from k3conformance.audit.rescore import NO_SCORE_WHY, SKIPPED_WHY, rescorer_for
from k3conformance.runs.records import iter_records
from k3conformance.runs.stored import StoredRun

ANSWER_STEP = "answer"


@dataclass(frozen=True)
class Exchange:
    """One recorded sample of an item: the request as sent, the answer as stored, its score."""

    sample: int
    request: dict[str, Any]
    response: dict[str, Any]
    score: float
    gold: Mapping[str, Any]

    @property
    def temperature(self) -> float | None:
        value = self.request.get("temperature")
        return float(value) if isinstance(value, (int, float)) else None


@dataclass(frozen=True)
class AuditItem:
    suite: str
    item: str
    exchanges: tuple[Exchange, ...]


@dataclass
class Eligible:
    """The items an audit may draw from, and per suite how many items were left out and why."""

    items: list[AuditItem] = field(default_factory=list)
    skipped: dict[str, Counter[str]] = field(default_factory=lambda: defaultdict(Counter))

    def suites(self) -> dict[str, int]:
        return dict(sorted(Counter(item.suite for item in self.items).items()))

    def sample(self, count: int, seed: int) -> list[AuditItem]:
        """`count` items drawn at random with `seed` (all of them when there are fewer), in a stable order."""
        ordered = sorted(self.items, key=lambda entry: (entry.suite, entry.item))
        chosen = random.Random(seed).sample(ordered, min(count, len(ordered)))
        return sorted(chosen, key=lambda entry: (entry.suite, entry.item))


def _scored_details(run: StoredRun) -> dict[tuple[str, str], list[Mapping[str, Any]]]:
    """Per (suite, item), each recorded sample's score detail (its `correct` and `gold`), in sample order."""
    from k3conformance.gate.evidence import outcome_records

    details: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for record in outcome_records(run):
        score = record.get("score")
        item = record.get("item")
        if isinstance(score, Mapping) and isinstance(item, str) and isinstance(score.get("details"), list):
            details[(str(record["suite"]), item)] = [d for d in score["details"] if isinstance(d, Mapping)]
    return details


def eligible_items(run: StoredRun) -> Eligible:
    """Every item of `run` an audit can ask again and score, and what it leaves out."""
    found = Eligible()
    run_dir = run.run_dir
    if run_dir is None:
        return found
    steps: dict[tuple[str, str], dict[int, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for record in iter_records(run_dir, "response"):
        suite, item = record.get("suite"), record.get("item")
        if isinstance(suite, str) and isinstance(item, str):
            steps[(suite, item)][int(record.get("sample", 0))].append(record)
    details = _scored_details(run)
    for (suite, item), samples in sorted(steps.items()):
        why = _why_not(suite, item, samples, details.get((suite, item)))
        if why is not None:
            found.skipped[suite][why] += 1
            continue
        rescore = rescorer_for(suite)
        assert rescore is not None  # _why_not said so
        exchanges = []
        scored = details[(suite, item)]
        for sample, (record,) in sorted(samples.items()):
            detail = scored[sample]
            response = record["response"]
            exchanges.append(Exchange(sample, record["request"], response, float(detail["correct"]), detail))
        found.items.append(AuditItem(suite, item, tuple(exchanges)))
    return found


def _why_not(
    suite: str,
    item: str,
    samples: Mapping[int, Sequence[dict[str, Any]]],
    details: Sequence[Mapping[str, Any]] | None,
) -> str | None:
    rescore = rescorer_for(suite)
    if rescore is None:
        return SKIPPED_WHY.get(suite, NO_SCORE_WHY)
    if any(len(records) != 1 or records[0].get("step") != ANSWER_STEP for records in samples.values()):
        return "more than one exchange per sample"
    if any(
        records[0].get("status") != "ok" or not isinstance(records[0].get("response"), dict)
        for records in samples.values()
    ):
        return "a sample the run got no answer for"
    if details is None or len(details) != len(samples) or sorted(samples) != list(range(len(samples))):
        return "no recorded score for every sample"
    for sample, (record,) in samples.items():
        detail = details[sample]
        again = rescore(item, detail, record["response"].get("content"))
        if again is None or "correct" not in detail or again != float(detail["correct"]):
            return "its stored answer does not rescore to its recorded score (the scorer changed since the run?)"
    return None
