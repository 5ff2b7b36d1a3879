"""Failures first: the conformance suites run before the accuracy suites, and each kind is a marker.

A parser or API bug shows in the first seconds of a conformance suite, while one agentic task
against a real K3 takes minutes per turn: collected in file order, the agentic suite came first
and the finished conformance results waited behind it (27 s into the quick start on the
simulator, hours against a real deployment). A suite is an accuracy suite when any of its tests
scores items (takes the `k3_score` fixture); every other suite is a conformance suite. Whole
suites move, in a stable sort, so each module's tests stay together and every xdist worker
computes the same order from the same collection (the share scheduler deals items in it).

The load lane goes last of all, after the accuracy suites too: it is the one part of a run that
can take a deployment down (a crash under concurrent guided decoding, checks/load.py), and what
it costs then is only its own finding, not the evidence of the suites before it.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from k3conformance.probes.probe import probe_of
from k3conformance.run.tally import suite_of

ACCURACY = "accuracy"
CONFORMANCE = "conformance"
SCORE_FIXTURE = "k3_score"
MARKERS = (
    f"{CONFORMANCE}: a test of a k3conformance conformance suite (parser, tool calls, API): `-m {CONFORMANCE}`",
    f"{ACCURACY}: a test of a k3conformance accuracy suite (math, coding, agentic coding): `-m {ACCURACY}`",
)


def suite_kinds(items: Sequence[pytest.Item]) -> dict[str, str]:
    """Suite name -> accuracy or conformance."""
    kinds: dict[str, str] = {}
    for item in items:
        suite = suite_of(item)
        if suite is None:
            continue
        scores = SCORE_FIXTURE in getattr(item, "fixturenames", ())
        if scores or kinds.get(suite) != ACCURACY:
            kinds[suite] = ACCURACY if scores else kinds.get(suite, CONFORMANCE)
    return kinds


def mark_kinds(items: Sequence[pytest.Item], kinds: dict[str, str]) -> None:
    for item in items:
        suite = suite_of(item)
        if suite is not None:
            item.add_marker(kinds[suite])


def conformance_first(items: list[pytest.Item], kinds: dict[str, str]) -> None:
    """Conformance suites (and tests of no suite) first, accuracy suites after, otherwise as collected."""
    items.sort(key=lambda item: kinds.get(suite_of(item) or "") == ACCURACY)


def load_lanes_last(items: list[pytest.Item]) -> None:
    """Tests whose probe sets the load itself (`Probe.exclusive`, the load lane) after every other
    test, whatever the other order: the lane drives the deployment harder than any suite, and a
    deployment it takes down (TensorRT-LLM PR 17845) then costs no other suite its evidence."""
    items.sort(key=_sets_the_load)


def _sets_the_load(item: pytest.Item) -> bool:
    probe = probe_of(item)
    return probe is not None and probe.exclusive
