"""The sequential verdicts put into the gate's result, for the run (`run/hooks.py`) and for
`k3conformance compare`'s replay alike."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from k3conformance.gate.sequential.rule import BY_MAXIMUM
from k3conformance.gate.sequential.state import verdict_lines
from k3conformance.gate.verdict import (
    ABOUT_ACCURACY,
    ABOUT_COVERAGE,
    ABOUT_UNJUDGED,
    INCOMPLETE,
    Finding,
    GateResult,
    settle,
)
from k3conformance.runs.stored import StoredRun
from k3conformance.stats.paired import PASS


def apply_sequential(result: GateResult, paths: Mapping[str, Any], baseline: StoredRun) -> None:
    """The sequential verdicts take the place of the fixed-size accuracy verdicts of the suites they
    decided. `paths` is the run's sequential block (`SequentialRun.to_summary`, kept in summary.json),
    so `k3conformance compare` re-gates a stored sequential run as the run itself did.

    The only ways to judge a suite on fewer than the baseline's items are a stop the rule made at a
    look or a monitor, and the end of the plan's own maximum (the items its power asks for), on an
    order committed over every item the baseline scored. Anything else that left items out keeps
    its coverage finding: a maximum an option cut (`--k3-max-items 1` reaches it after one item;
    a block that does not say is taken as cut), an order that is not the baseline's item set
    (planned on a subset, or edited), or no stop at all.

    A suite the rule decided, at a look, a monitor or the end of its plan's maximum, takes the
    rule's verdict for its accuracy: the design's last look has bounds of its own (PASS at 1.74
    where a one-sided fixed-size test at 5% passes at 1.64, for five looks), and the fixed-size
    comparison of the same items would PASS what the design's calibration counts as
    INCONCLUSIVE, above α at the margin. A maximum an option cut keeps the fixed-size comparison
    beside its coverage finding."""
    result.sequential = dict(paths)
    findings = list(result.findings)
    for suite, path in paths.items():
        stop = path["stop"]
        superseded = set()
        early = stop is not None and stop["by"] != BY_MAXIMUM
        planned_end = stop is not None and stop["by"] == BY_MAXIMUM and _at_the_plans_maximum(path)
        if (early or planned_end) and _orders_the_baseline(path, baseline, suite):
            # A suite the sequential rule decided ran the items its plan asked for, in the committed
            # order: the baseline's other items are not missing evidence.
            superseded.add(ABOUT_COVERAGE)
        elif early or planned_end:
            result.notes.append(
                f"{suite}: the sequential order is not the baseline's item set: its stop does not excuse missing items"
            )
        if early or planned_end:
            # The sequential rule's error rates hold over all of its looks, the last one included.
            superseded.add(ABOUT_ACCURACY)
        findings = [f for f in findings if f.suite != suite or f.about not in superseded]
        if stop is None and path.get("left_unjudged"):
            # Its missing items are missing on purpose (--k3-stop-on-fail): still INCOMPLETE, and saying why.
            # A FAIL has decided the gate, so the fixed-size comparisons of the few items it ran (a
            # minimum detectable drop of tens of points) would only add noise to the reasons.
            findings = [f for f in findings if f.suite != suite or f.about not in (ABOUT_COVERAGE, ABOUT_ACCURACY)]
            text = f"{suite}: left unjudged, {path['items']} items fed: {path['left_unjudged']}"
            findings.append(Finding(INCOMPLETE, text, suite, ABOUT_UNJUDGED))
        if ABOUT_ACCURACY in superseded and stop["verdict"] != PASS:
            text = f"{suite}: sequential {stop['verdict']} by the {stop['by']} after {stop['items']} items"
            findings.append(Finding(stop["verdict"], text, suite, ABOUT_ACCURACY))
    result.notes += verdict_lines(paths)
    settle(result, findings)


def _at_the_plans_maximum(path: Mapping[str, Any]) -> bool:
    """Whether the block says that no option cut its maximum (blocks before it said so do not)."""
    return "maximum_capped_by" in path and path["maximum_capped_by"] is None


def _orders_the_baseline(path: Mapping[str, Any], baseline: StoredRun, suite: str) -> bool:
    """Whether the committed order holds exactly the items the baseline scored, each once."""
    order = [str(item) for item in path.get("order") or []]
    scored = {item for item, totals in baseline.item_totals(suite).items() if totals.samples}
    return len(order) == len(set(order)) and set(order) == scored
