"""What each test of a suite came to, and the per-suite tally.

The process that runs a test attaches a small plain-data outcome to its report
(`report.user_properties`), which xdist forwards to the controller; the controller (or
the single process) tallies them per suite. Infrastructure errors are their own kind:
they never count as a wrong answer.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, cast

import pytest

from k3conformance.probes.probe import InfrastructureError, probe_of
from k3conformance.runs.schema import SuiteEntry
from k3conformance.scoring.item_score import ItemScore, summarize

USER_PROPERTY = "k3conformance"
METRICS_KEY = pytest.StashKey[dict[str, float]]()
SCORE_KEY = pytest.StashKey[ItemScore]()
MESSAGE_CHARS = 400
_LAYER = re.compile(r"\[layer: (\w+)\]")

PASSED = "passed"
FAILED = "failed"
INFRA = "infra_error"
ERROR = "error"
SKIPPED = "skipped"


def suite_of(item: pytest.Item) -> str | None:
    probe = probe_of(item)
    if probe is not None:
        return probe.suite
    marker = item.get_closest_marker("k3_suite")
    return str(marker.args[0]) if marker and marker.args else None


def classify(item: pytest.Item, call: pytest.CallInfo[None], report: pytest.TestReport) -> dict[str, Any] | None:
    """The outcome of a suite test, once per test: from its call phase, or from a setup
    that did not let it get there."""
    suite = suite_of(item)
    if suite is None:
        return None
    if report.when == "setup" and report.passed:
        return None
    if report.when == "teardown":
        return None
    probe = probe_of(item)
    kind, layer = PASSED, None
    message = ""
    if report.skipped:
        kind = SKIPPED
    elif report.failed:
        excinfo = call.excinfo
        message = str(excinfo.value) if excinfo is not None else str(report.longrepr)
        if excinfo is not None and excinfo.errisinstance(InfrastructureError):
            kind, layer = INFRA, "infra"
        elif report.when == "call" and excinfo is not None and excinfo.errisinstance(AssertionError):
            kind = FAILED
            found = _LAYER.search(message)
            layer = found.group(1) if found else None
        else:
            kind = ERROR
    callspec = getattr(item, "callspec", None)
    mode = callspec.params.get("mode") if callspec is not None else None
    return {
        "suite": suite,
        # Tests without a probe (e.g. the model listing) are tests, not items.
        "item": probe.item if probe else None,
        "test": item.originalname if isinstance(item, pytest.Function) else item.name,
        "mode": mode if isinstance(mode, str) else None,
        "outcome": kind,
        "layer": layer,
        "message": message[:MESSAGE_CHARS],
        "metrics": item.stash.get(METRICS_KEY, {}),
        "score": item.stash[SCORE_KEY].to_record() if SCORE_KEY in item.stash else None,
    }


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


def tally_report(tallies: dict[str, SuiteTally], report: pytest.TestReport) -> None:
    for name, value in report.user_properties:
        if name == USER_PROPERTY and isinstance(value, dict):
            tallies.setdefault(value["suite"], SuiteTally()).add(value, report.nodeid)
