"""One verdict per suite, with every rule that decided it, named: what a script reads from gate.json.

The gate (gate/verdict.py) settles one overall verdict from a list of findings, and a suite's
fixed-size comparison keeps its own verdict even when a later rule (the sequential gate's
looping monitor, a rate test, a conformance check) decided that suite otherwise. Read on its
own, `accuracy.agentic_coding.verdict: INCONCLUSIVE` then contradicts a top-level FAIL by the
looping monitor on that very suite. This module regroups the same findings per suite and names
the rule of each; it decides nothing: the worst finding of a suite is its verdict, and the
worst finding of all is the gate's, exactly as `settle` has it (a test holds the two together).

A finding without a suite that names one at its start ("math: scored on the baseline but not
on the candidate", "tool_calls/parallel passes on the baseline and fails ...") belongs to that
suite; the rest (the candidate run unfinished, the runs sharing no suite, the shape policy's
demands on the baseline) are run rules: they decide the gate, not one suite.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from k3conformance.gate.sequential.rule import BY_MAXIMUM
from k3conformance.gate.verdict import (
    ABOUT_ACCURACY,
    ABOUT_COVERAGE,
    ABOUT_RATE,
    ABOUT_UNJUDGED,
    Finding,
    GateResult,
)
from k3conformance.stats.paired import FAIL, INCONCLUSIVE, PASS

INCOMPLETE = "INCOMPLETE"
SEVERITY: Mapping[str, int] = {PASS: 0, INCONCLUSIVE: 1, INCOMPLETE: 2, FAIL: 3}

RULE_ACCURACY = "accuracy (paired, fixed-size)"
RULE_COVERAGE = "coverage (--k3-min-coverage)"
RULE_CHECK = "conformance check regression"
RULE_MISSING = "suite missing on the candidate"
RULE_SHAPE = "deployment shape policy"
RULE_RUN = "run"
RULE_DECIDED = "not run: the gate's verdict was already decided (--k3-stop-on-fail)"
_NAMED_SUITE = re.compile(r"^([A-Za-z0-9_.+-]+)(?::|/\S+ passes) ")


@dataclass(frozen=True)
class RuleDecision:
    """One rule's say on a suite (or on the run): its name, verdict and the reason in words."""

    rule: str
    verdict: str
    reason: str


@dataclass
class SuiteVerdict:
    suite: str
    verdict: str = PASS
    # Every rule that decided the verdict, worst first; for PASS, the rules that passed it.
    decided_by: list[RuleDecision] = field(default_factory=list)
    # The paired accuracy change over the items both runs scored, its interval and the smallest
    # drop those items can detect (None for a suite without an accuracy comparison).
    effect: float | None = None
    interval: tuple[float, float] | None = None
    min_detectable_drop: float | None = None
    items: int | None = None
    failing_checks: list[str] = field(default_factory=list)
    # Why the interval lies beyond the margin and the verdict is not FAIL (the interval is not
    # Holm-adjusted; the FAIL test's p-value is): shown wherever the interval is.
    interval_note: str | None = None
    # Why the suite was not run to the end: another suite's FAIL had decided the gate, by which rule
    # and where (--k3-stop-on-fail). Its few items' comparison is then no evidence worth showing.
    not_run: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["interval"] = list(self.interval) if self.interval else None
        return data


@dataclass
class GateVerdicts:
    verdict: str
    suites: dict[str, SuiteVerdict]
    # Findings that decide the gate without belonging to one suite.
    run_rules: list[RuleDecision]

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "suites": {name: entry.to_dict() for name, entry in sorted(self.suites.items())},
            "run_rules": [asdict(rule) for rule in self.run_rules],
        }


def worst(verdicts: list[str]) -> str:
    return max(verdicts, key=lambda verdict: SEVERITY[verdict], default=PASS)


def suite_verdicts(result: GateResult) -> GateVerdicts:
    suites: dict[str, SuiteVerdict] = {}

    def entry(name: str) -> SuiteVerdict:
        return suites.setdefault(name, SuiteVerdict(name))

    for name in (*result.accuracy, *result.rates, *result.coverage, *(result.sequential or {})):
        entry(name)
    run_rules: list[RuleDecision] = []
    for finding in result.findings:
        named = _suite_of(finding)
        decision = RuleDecision(_rule_of(finding, named, result), finding.verdict, finding.text)
        if named is None:
            run_rules.append(decision)
        else:
            entry(named).decided_by.append(decision)
    for regression in result.regressions:
        entry(regression.suite).failing_checks.append(regression.check)
    for name, suite in suites.items():
        suite.decided_by.sort(key=lambda decision: -SEVERITY[decision.verdict])
        suite.verdict = worst([decision.verdict for decision in suite.decided_by])
        if not suite.decided_by:
            suite.decided_by = _passing_rules(name, result)
        suite.not_run = _not_run(result, name)
        comparison = result.accuracy.get(name)
        if comparison is not None:
            suite.effect = comparison.difference
            suite.interval = (comparison.lower, comparison.upper)
            suite.min_detectable_drop = comparison.min_detectable_drop
            suite.items = comparison.items
            if suite.verdict != FAIL:
                suite.interval_note = comparison.not_fail_because
    return GateVerdicts(result.verdict, suites, run_rules)


def _suite_of(finding: Finding) -> str | None:
    if finding.suite is not None:
        return finding.suite
    named = _NAMED_SUITE.match(finding.text)
    return named.group(1) if named else None


def _not_run(result: GateResult, suite: str) -> str | None:
    path = (result.sequential or {}).get(suite)
    if not isinstance(path, Mapping) or path.get("stop") is not None or not path.get("left_unjudged"):
        return None
    fed = int(path.get("items") or 0)
    return f"{path['left_unjudged']}; {fed} of its items had been sent" if fed else str(path["left_unjudged"])


def _rule_of(finding: Finding, suite: str | None, result: GateResult) -> str:
    if finding.about == ABOUT_UNJUDGED:
        return RULE_DECIDED
    if finding.about == ABOUT_COVERAGE:
        return RULE_COVERAGE
    if finding.about == ABOUT_ACCURACY:
        stop = _stop_of(result, suite)
        if stop is not None and ": sequential " in finding.text:
            return f"sequential gate: {stop['by']}"
        return RULE_ACCURACY
    if finding.about == ABOUT_RATE:
        for name in result.rates.get(suite or "") or {}:
            if finding.text.startswith(f"{suite}: {name} rate"):
                return f"{name} rate (one-sided Fisher exact)"
        return "rate"
    if suite is not None and finding.text.startswith(f"{suite}/"):
        return RULE_CHECK
    if suite is not None and "scored on the baseline but not on the candidate" in finding.text:
        return RULE_MISSING
    if suite is not None and "share no scored item" in finding.text:
        return RULE_COVERAGE
    if "the deployment differs from the baseline's" in finding.text:
        return RULE_SHAPE
    return RULE_RUN


def _stop_of(result: GateResult, suite: str | None) -> Mapping[str, Any] | None:
    path = (result.sequential or {}).get(suite or "")
    return path.get("stop") if isinstance(path, Mapping) else None


def _passing_rules(suite: str, result: GateResult) -> list[RuleDecision]:
    """What passed a suite no finding names: the sequential stop when it decided, else the
    fixed-size comparison, and the rate tests."""
    rules: list[RuleDecision] = []
    stop = _stop_of(result, suite)
    comparison = result.accuracy.get(suite)
    if stop is not None and stop["by"] != BY_MAXIMUM:
        rules.append(
            RuleDecision(f"sequential gate: {stop['by']}", str(stop["verdict"]), f"stopped after {stop['items']} items")
        )
    elif comparison is not None:
        change = (
            f"{comparison.difference * 100:+.1f} pts [{comparison.lower * 100:+.1f}, {comparison.upper * 100:+.1f}]"
        )
        rules.append(
            RuleDecision(RULE_ACCURACY, comparison.verdict, f"{change}, margin {comparison.margin * 100:.1f} pts")
        )
    for name, rate in (result.rates.get(suite) or {}).items():
        rules.append(
            RuleDecision(
                f"{name} rate (one-sided Fisher exact)",
                rate.verdict,
                f"{rate.baseline_rate:.1%} → {rate.candidate_rate:.1%}, floor {rate.floor:.0%}",
            )
        )
    return rules
