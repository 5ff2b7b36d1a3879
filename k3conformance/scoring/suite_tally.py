"""What a suite's tests came to: per check, per item, summed over the suite's outcome records.

Plain data, built from outcome records alone (`SuiteTally.add`), so that the run in progress
(run/tally.py, from each test's report) and the gate reading a stored run's records
(gate/evidence.py) tally the same outcomes the same way. Infrastructure errors are their own
kind: they never count as a wrong answer.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, cast

from k3conformance.runs.schema import SuiteEntry
from k3conformance.scoring.item_score import ItemScore, summarize

PASSED = "passed"
FAILED = "failed"
INFRA = "infra_error"
ERROR = "error"
SKIPPED = "skipped"


@dataclass
class CheckTally:
    """One check (a test function) in one mode, across the items of its suite."""

    passed: int = 0
    failed: int = 0
    infra_errors: int = 0
    errors: int = 0
    layers: dict[str, int] = field(default_factory=dict)
    # One excerpt per failure layer: enough to see what went wrong without the log.
    excerpts: dict[str, str] = field(default_factory=dict)


@dataclass
class SuiteTally:
    tests: int = 0
    passed: int = 0
    failed: int = 0
    infra_errors: int = 0
    errors: int = 0
    skipped: int = 0
    items: set[str] = field(default_factory=set)
    checks: dict[str, CheckTally] = field(default_factory=dict)
    # Numbers tests report through `k3_metrics`, summed over the suite (e.g. tool-call
    # trigger counts, from which precision and recall follow).
    metrics: dict[str, float] = field(default_factory=dict)
    # Accuracy suites: each item's score, summed over the tests that scored it.
    scores: dict[str, ItemScore] = field(default_factory=dict)

    def add(self, outcome: dict[str, Any], nodeid: str) -> None:
        self.tests += 1
        if outcome.get("score") and outcome["item"] is not None:
            self.scores.setdefault(outcome["item"], ItemScore()).merge(outcome["score"])
        if outcome["item"] is not None:
            self.items.add(outcome["item"])
        name = outcome["test"].removeprefix("test_") + (f"[{outcome['mode']}]" if outcome.get("mode") else "")
        check = self.checks.setdefault(name, CheckTally())
        for metric, value in (outcome.get("metrics") or {}).items():
            self.metrics[metric] = self.metrics.get(metric, 0) + value
        kind = outcome["outcome"]
        if kind == PASSED:
            self.passed += 1
            check.passed += 1
        elif kind == FAILED:
            self.failed += 1
            check.failed += 1
            layer = outcome["layer"] or "unattributed"
            check.layers[layer] = check.layers.get(layer, 0) + 1
            check.excerpts.setdefault(layer, f"{nodeid}: {outcome['message']}")
        elif kind == INFRA:
            self.infra_errors += 1
            check.infra_errors += 1
        elif kind == SKIPPED:
            self.skipped += 1
        else:
            self.errors += 1
            check.errors += 1

    @property
    def score(self) -> float | None:
        """Share of scored tests that passed; infrastructure errors are not scored."""
        scored = self.passed + self.failed
        return self.passed / scored if scored else None

    def to_summary(self) -> SuiteEntry:
        data = asdict(self)
        data["items"] = len(self.items)
        data["score"] = self.score
        data["scores"] = {item: score.totals() for item, score in sorted(self.scores.items())}
        accuracy = summarize(self.scores)
        data["accuracy"] = asdict(accuracy) if accuracy else None
        return cast(SuiteEntry, data)
