"""The gate: may the candidate deployment ship, judged against a stored baseline run?

Four kinds of evidence, each with its own verdict (see statistics.py for the statistics):

- accuracy, per accuracy suite, paired by item with a margin;
- looping and truncation rates, per accuracy suite, one-sided Fisher exact tests with a floor;
- conformance: a check that passed on every item of the baseline and fails on the candidate;
- the deployment shape: a candidate whose shape differs materially from the baseline's
  (width, MoE backend or runner, KV or state dtype, speculative decoding, disaggregation) is
  gated only when the long-output coding and the math suites both ran on it. The published
  regression this rule exists for (EP32 with a fused MoE kernel: coding 68% → 42%, half the
  outputs looping) left a math check looking fine.

The overall verdict is the worst of them, in this order: FAIL (a regression is shown),
INCOMPLETE (the evidence the policy asks for is missing, or requests failed), INCONCLUSIVE
(the data cannot tell a regression beyond the margin from none), PASS.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from k3conformance.endpoint.shapes import contradictions, describe, policy, run_shape_settings
from k3conformance.gate.statistics import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    RateComparison,
    ScoreComparison,
    compare_rates,
    compare_scores,
)
from k3conformance.runs.records import STATUS_COMPLETE
from k3conformance.runs.stored import StoredRun

GateVerdict = Literal["PASS", "FAIL", "INCONCLUSIVE", "INCOMPLETE"]
INCOMPLETE: GateVerdict = "INCOMPLETE"
_SEVERITY: Mapping[str, int] = {PASS: 0, INCONCLUSIVE: 1, INCOMPLETE: 2, FAIL: 3}
# Rates the gate compares, as named in the run summary's per-item totals.
RATE_EVENTS: Mapping[str, str] = {"looping": "looping", "truncation": "truncated"}


@dataclass(frozen=True)
class GateSettings:
    alpha: float = 0.05
    # Shares of accuracy (0.03 is 3 points).
    default_margin: float = 0.03
    margins: Mapping[str, float] = field(default_factory=dict)
    repetition_floor: float = 0.02
    truncation_floor: float = 0.05
    mode: str = "warn"

    def margin_of(self, suite: str) -> float:
        return self.margins.get(suite, self.default_margin)

    def floor_of(self, rate: str) -> float:
        return self.repetition_floor if rate == "looping" else self.truncation_floor


@dataclass(frozen=True)
class CheckRegression:
    suite: str
    check: str
    baseline_passed: int
    candidate_failed: int
    candidate_passed: int
    excerpt: str | None


@dataclass(frozen=True)
class ShapeFinding:
    baseline: str
    candidate: str
    differences: list[str]
    required_suites: tuple[str, ...]
    missing_suites: tuple[str, ...]
    # --k3-shape labels the server's own arguments contradict.
    contradictions: list[str]


@dataclass
class GateResult:
    baseline: str
    candidate: str
    settings: GateSettings
    accuracy: dict[str, ScoreComparison] = field(default_factory=dict)
    rates: dict[str, dict[str, RateComparison]] = field(default_factory=dict)
    regressions: list[CheckRegression] = field(default_factory=list)
    shape: ShapeFinding | None = None
    notes: list[str] = field(default_factory=list)
    # Why the verdict is what it is, worst first.
    reasons: list[str] = field(default_factory=list)
    verdict: GateVerdict = PASS
    # The sequential gate's path per suite (gate/sequential_run.py), when the run was gated sequentially.
    sequential: dict[str, Any] | None = None

    def fails(self) -> bool:
        """Whether the session (or `compare`) must exit non-zero."""
        if self.verdict in (FAIL, INCOMPLETE):
            return True
        return self.verdict == INCONCLUSIVE and self.settings.mode == "strict"

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "fails": self.fails(),
            "mode": self.settings.mode,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "alpha": self.settings.alpha,
            "reasons": self.reasons,
            "accuracy": {suite: comparison.to_dict() for suite, comparison in self.accuracy.items()},
            "rates": {
                suite: {name: rate.to_dict() for name, rate in rates.items()} for suite, rates in self.rates.items()
            },
            "regressions": [vars(regression) for regression in self.regressions],
            "shape": vars(self.shape) if self.shape else None,
            "notes": self.notes,
            "sequential": self.sequential,
        }


class GateOptions(Protocol):
    """The gate's options as the pytest plugin (Settings) and `k3conformance compare` (its
    parsed arguments) both carry them; margins in points."""

    @property
    def alpha(self) -> float: ...
    @property
    def margin(self) -> float: ...
    @property
    def margins(self) -> tuple[tuple[str, float], ...]: ...
    @property
    def repetition_floor(self) -> float: ...
    @property
    def truncation_floor(self) -> float: ...
    @property
    def gate(self) -> str: ...


def settings_for(options: GateOptions) -> GateSettings:
    return GateSettings(
        alpha=options.alpha,
        default_margin=options.margin / 100,
        margins={suite: points / 100 for suite, points in options.margins},
        repetition_floor=options.repetition_floor,
        truncation_floor=options.truncation_floor,
        mode=options.gate,
    )


def gate(baseline: StoredRun, candidate: StoredRun, settings: GateSettings) -> GateResult:
    result = GateResult(baseline=baseline.label, candidate=candidate.label, settings=settings)
    findings: list[tuple[str, str]] = []
    suites = sorted(baseline.scored_suites() | candidate.scored_suites())
    for suite in suites:
        _compare_suite(baseline, candidate, suite, settings, result, findings)
    result.regressions = _check_regressions(baseline, candidate)
    for regression in result.regressions:
        findings.append(
            (FAIL, f"{regression.suite}/{regression.check} passes on the baseline and fails on the candidate")
        )
    result.shape = _shape_finding(baseline, candidate)
    for suite in result.shape.missing_suites:
        findings.append(
            (INCOMPLETE, f"the shape differs from the baseline's, and the {suite} suite did not run on the candidate")
        )
    if candidate.summary.get("status") not in (STATUS_COMPLETE, None):
        findings.append(
            (INCOMPLETE, f"the candidate run is {candidate.summary.get('status')}: rerun with --k3-resume to finish it")
        )
    if not result.accuracy and not _conformance_suites(baseline, candidate):
        findings.append((INCOMPLETE, "the runs share no suite: nothing was compared"))
    if baseline.summary.get("simulator") != candidate.summary.get("simulator"):
        result.notes.append(
            "one run is against the reference deployment (a simulator) and the other is not: the comparison "
            "says nothing about either deployment"
        )
    findings.sort(key=lambda finding: -_SEVERITY[finding[0]])
    result.reasons = [f"{verdict}: {reason}" for verdict, reason in findings]
    result.verdict = findings[0][0] if findings else PASS  # type: ignore[assignment]
    return result


def _compare_suite(
    baseline: StoredRun,
    candidate: StoredRun,
    suite: str,
    settings: GateSettings,
    result: GateResult,
    findings: list[tuple[str, str]],
) -> None:
    if suite not in baseline.scored_suites():
        result.notes.append(f"{suite}: not in the baseline; not compared")
        return
    if suite not in candidate.scored_suites():
        result.notes.append(f"{suite}: in the baseline but not run on the candidate; not compared")
        return
    comparison = compare_scores(
        baseline.item_totals(suite),
        candidate.item_totals(suite),
        margin=settings.margin_of(suite),
        alpha=settings.alpha,
    )
    if comparison is None:
        findings.append((INCOMPLETE, f"{suite}: the runs share no scored item"))
        return
    result.accuracy[suite] = comparison
    finding = _accuracy_finding(suite, comparison)
    if finding is not None:
        findings.append(finding)
    if comparison.baseline_only or comparison.candidate_only:
        result.notes.append(
            f"{suite}: compared on the {comparison.items} items both runs scored ({comparison.baseline_only} only in "
            f"the baseline, {comparison.candidate_only} only in the candidate)"
        )
    for name, event in RATE_EVENTS.items():
        before, after = baseline.event_count(suite, event), candidate.event_count(suite, event)
        if before is None or after is None:
            missing_in = "the baseline" if before is None else "the candidate"
            result.notes.append(f"{suite}: {name} was not recorded in {missing_in}; not compared")
            continue
        rate = compare_rates(name, before, after, floor=settings.floor_of(name), alpha=settings.alpha)
        result.rates.setdefault(suite, {})[name] = rate
        finding = _rate_finding(suite, rate)
        if finding is not None:
            findings.append(finding)


def _accuracy_finding(suite: str, comparison: ScoreComparison) -> tuple[str, str] | None:
    change = _points(comparison.difference)
    if comparison.verdict == FAIL:
        margin = _points(comparison.margin, sign=False)
        return FAIL, f"{suite}: accuracy {change} beyond the {margin} margin (p = {comparison.p_value:.2g})"
    if comparison.verdict == INCONCLUSIVE:
        interval = f"[{_points(comparison.lower)}, {_points(comparison.upper)}]"
        detectable = _points(comparison.min_detectable_drop, sign=False)
        return INCONCLUSIVE, (
            f"{suite}: accuracy {change} {interval}; drops under {detectable} cannot be detected with "
            f"{comparison.items} items; {comparison.to_decide}"
        )
    return None


def _rate_finding(suite: str, rate: RateComparison) -> tuple[str, str] | None:
    change = f"{suite}: {rate.name} rate {rate.baseline_rate:.1%} → {rate.candidate_rate:.1%}"
    if rate.verdict == FAIL:
        return FAIL, f"{change} (p = {rate.p_value:.2g})"
    if rate.verdict == INCONCLUSIVE:
        return (
            INCONCLUSIVE,
            f"{change}, above the {rate.floor:.0%} floor but not significantly higher (p = {rate.p_value:.2g})",
        )
    return None


def _conformance_suites(baseline: StoredRun, candidate: StoredRun) -> set[str]:
    return {
        suite
        for suite in baseline.suites.keys() & candidate.suites.keys()
        if baseline.suites[suite].get("checks") and candidate.suites[suite].get("checks")
    }


def _check_regressions(baseline: StoredRun, candidate: StoredRun) -> list[CheckRegression]:
    regressions = []
    for suite in sorted(_conformance_suites(baseline, candidate)):
        before: Mapping[str, Mapping[str, Any]] = baseline.suites[suite]["checks"]
        after: Mapping[str, Mapping[str, Any]] = candidate.suites[suite]["checks"]
        for check in sorted(before.keys() & after.keys()):
            was, now = before[check], after[check]
            if was.get("passed", 0) and not was.get("failed", 0) and now.get("failed", 0):
                excerpts: Mapping[str, str] = now.get("excerpts") or {}
                regressions.append(
                    CheckRegression(
                        suite=suite,
                        check=check,
                        baseline_passed=int(was["passed"]),
                        candidate_failed=int(now["failed"]),
                        candidate_passed=int(now.get("passed", 0)),
                        excerpt=next(iter(excerpts.values()), None),
                    )
                )
    return regressions


def _shape_finding(baseline: StoredRun, candidate: StoredRun) -> ShapeFinding:
    sides = []
    for run in (baseline, candidate):
        settings, source = run_shape_settings(run.summary.get("shape"), run.summary.get("server_info"))
        shown = (
            f"{run.summary.get('shape', '?')}: {describe(settings)} (from {source})"
            if settings
            else (f"{run.summary.get('shape', '?')}: settings unknown")
        )
        sides.append((settings, shown))
    (base_settings, base_shown), (cand_settings, cand_shown) = sides
    decision = policy(base_settings, cand_settings)
    ran = candidate.scored_suites()
    missing = tuple(suite for suite in decision.required_suites if suite not in ran)
    derived, _ = run_shape_settings(None, candidate.summary.get("server_info"))
    return ShapeFinding(
        baseline=base_shown,
        candidate=cand_shown,
        differences=decision.differs,
        required_suites=decision.required_suites,
        missing_suites=missing,
        contradictions=contradictions(candidate.summary.get("shape"), derived),
    )


def _points(share: float, *, sign: bool = True) -> str:
    return f"{share * 100:+.1f} pts" if sign else f"{share * 100:.1f} pts"
