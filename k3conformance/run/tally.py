"""What each test of a suite came to, and the per-suite tally.

The process that runs a test attaches a small plain-data outcome to its report
(`report.user_properties`), which xdist forwards to the controller; the controller (or
the single process) tallies them per suite. Infrastructure errors are their own kind:
they never count as a wrong answer.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from k3conformance.probes.probe import InfrastructureError, probe_of
from k3conformance.scoring.item_score import ItemScore
from k3conformance.scoring.suite_tally import ERROR, FAILED, INFRA, PASSED, SKIPPED, SuiteTally

USER_PROPERTY = "k3conformance"
METRICS_KEY = pytest.StashKey[dict[str, float]]()
SCORE_KEY = pytest.StashKey[ItemScore]()
MESSAGE_CHARS = 400
_LAYER = re.compile(r"\[layer: (\w+)\]")


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


def tally_report(tallies: dict[str, SuiteTally], report: pytest.TestReport) -> None:
    for name, value in report.user_properties:
        if name == USER_PROPERTY and isinstance(value, dict):
            tallies.setdefault(value["suite"], SuiteTally()).add(value, report.nodeid)
