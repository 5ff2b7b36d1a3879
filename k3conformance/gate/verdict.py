"""The gate: may the candidate deployment ship, judged against a stored baseline run?

Four kinds of evidence, each with its own verdict (see stats/paired.py for the tests):

- accuracy, per accuracy suite, paired by item with a margin;
- looping and truncation rates, per accuracy suite, one-sided Fisher exact tests with a floor;
- conformance: a check that passed on every item of the baseline and fails on the candidate;
- the deployment shape (gate/policy.py): a candidate whose deployment differs from the
  baseline's in anything recorded, or cannot be told apart from it, is gated only when the
  long-output coding and the math suites ran on both runs. The published regression this
  rule exists for (EP32 with a fused MoE kernel: coding 68% → 42%, half the outputs
  looping) left a math check looking fine.
  Two llama.cpp deployments, each known whole, need every suite the baseline scored instead,
  unless the model may be a Kimi model.

It fails closed: missing evidence is INCOMPLETE, never PASS. A suite the baseline scored
and the candidate did not, a required suite missing from either run, a candidate that
scored fewer of the baseline's items than --k3-min-coverage (absent, unscored and
zero-sample items all count as missing; a wrong, truncated or unanswered item is scored, as
a loss), an unfinished candidate run: each is INCOMPLETE.

The FAIL side of every statistical test of one gate (accuracy and both rates of every
suite) is Holm-adjusted, so a healthy candidate fails the whole gate at most alpha of the
time; the PASS side needs every comparison to pass, which holds alpha without adjustment
(an intersection-union test).

The overall verdict is the worst of them, in this order: FAIL (a regression is shown),
INCOMPLETE (the evidence the policy asks for is missing, or requests failed), INCONCLUSIVE
(the data cannot tell a regression beyond the margin from none), PASS.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from k3conformance.deployment.cookbook import read_run_shape
from k3conformance.deployment.llamacpp_identity import llamacpp_deployment
from k3conformance.gate.evidence import judged_on_records
from k3conformance.gate.policy import (
    deployment_differences,
    deployment_identity,
    llamacpp_policy,
    settings_differences,
    shape_policy,
)
from k3conformance.gate.settings import GateSettings
from k3conformance.runs.records import STATUS_COMPLETE
from k3conformance.runs.stored import StoredRun
from k3conformance.stats.paired import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    RateComparison,
    ScoreComparison,
    compare_rates_by_item,
    compare_scores,
    holm,
)

GateVerdict = Literal["PASS", "FAIL", "INCONCLUSIVE", "INCOMPLETE"]
INCOMPLETE: GateVerdict = "INCOMPLETE"
_SEVERITY: Mapping[str, int] = {PASS: 0, INCONCLUSIVE: 1, INCOMPLETE: 2, FAIL: 3}
# Rates the gate compares, as named in the run summary's per-item totals.
RATE_EVENTS: Mapping[str, str] = {"looping": "looping", "truncation": "truncated"}


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
    # Required suites the baseline itself did not score.
    missing_in_baseline: tuple[str, ...]
    # --k3-shape labels the server's own arguments contradict.
    contradictions: list[str]


@dataclass(frozen=True)
class Coverage:
    """How many of the baseline's scored items the candidate scored too, per suite."""

    baseline_items: int
    compared: int
    # Baseline items the candidate has no entry for, or an entry with no sample.
    absent: int
    unscored: int

    @property
    def share(self) -> float:
        return self.compared / self.baseline_items if self.baseline_items else 0.0


@dataclass
class GateResult:
    baseline: str
    candidate: str
    settings: GateSettings
    accuracy: dict[str, ScoreComparison] = field(default_factory=dict)
    rates: dict[str, dict[str, RateComparison]] = field(default_factory=dict)
    coverage: dict[str, Coverage] = field(default_factory=dict)
    regressions: list[CheckRegression] = field(default_factory=list)
    shape: ShapeFinding | None = None
    notes: list[str] = field(default_factory=list)
    # Why the verdict is what it is, worst first (`findings` as text).
    reasons: list[str] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    verdict: GateVerdict = PASS
    # Where the baseline came from and why it was taken.
    baseline_origin: str = ""
    # The sequential gate's path per suite (gate/sequential/state.py), when the run was gated sequentially.
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
            "baseline_origin": self.baseline_origin,
            "candidate": self.candidate,
            "alpha": self.settings.alpha,
            "policy": self.settings.policy(),
            "reasons": self.reasons,
            "accuracy": {suite: comparison.to_dict() for suite, comparison in self.accuracy.items()},
            "rates": {
                suite: {name: rate.to_dict() for name, rate in rates.items()} for suite, rates in self.rates.items()
            },
            "coverage": {suite: {**vars(entry), "share": entry.share} for suite, entry in self.coverage.items()},
            "regressions": [vars(regression) for regression in self.regressions],
            "shape": vars(self.shape) if self.shape else None,
            "notes": self.notes,
            "sequential": self.sequential,
        }


# What a finding is about: a later rule that decides a suite (the sequential gate) replaces the
# findings of that suite it has superseded by this, not by reading their text.
ABOUT_COVERAGE = "coverage"
ABOUT_ACCURACY = "accuracy"
ABOUT_RATE = "rate"
ABOUT_RUN = "run"
# A suite a FAIL of another suite left unjudged (--k3-stop-on-fail): INCOMPLETE on purpose, not by
# missing evidence, so it is told apart from a coverage finding.
ABOUT_UNJUDGED = "left unjudged"


@dataclass(frozen=True)
class Finding:
    """One reason for the verdict."""

    verdict: str
    text: str
    suite: str | None = None
    about: str = ABOUT_RUN

    def __str__(self) -> str:
        return f"{self.verdict}: {self.text}"


def settle(result: GateResult, findings: list[Finding]) -> None:
    """The verdict is the worst finding's; the reasons list them, worst first."""
    result.findings = sorted(findings, key=lambda finding: -_SEVERITY[finding.verdict])
    result.reasons = [str(finding) for finding in result.findings]
    result.verdict = result.findings[0].verdict if result.findings else PASS  # type: ignore[assignment]


def judge(baseline: StoredRun, candidate: StoredRun, settings: GateSettings) -> GateResult:
    result = GateResult(
        baseline=baseline.label, candidate=candidate.label, settings=settings, baseline_origin=baseline.origin
    )
    findings: list[Finding] = []
    # The records are the evidence (gate/evidence.py): a summary that disagrees with them is
    # judged on them, and the disagreement keeps the verdict from PASS.
    recorded_baseline, recorded_candidate = judged_on_records(baseline), judged_on_records(candidate)
    baseline, candidate = recorded_baseline.run, recorded_candidate.run
    findings += [
        Finding(INCOMPLETE, problem) for problem in (*recorded_baseline.problems, *recorded_candidate.problems)
    ]
    base_suites, cand_suites = baseline.scored_suites(), candidate.scored_suites()
    for suite in sorted(base_suites | cand_suites):
        if suite not in base_suites and suite in baseline.summary.get("datasets", {}):
            # The baseline selected the suite's items and has no score for them: a partial (or
            # edited) baseline, not one that never ran the suite.
            findings.append(
                Finding(
                    INCOMPLETE,
                    f"{suite}: the baseline selected its items and scored none: the baseline is partial; store a "
                    "complete one",
                    suite,
                )
            )
        elif suite not in base_suites:
            # A loss the candidate shows in a suite the baseline never scored would otherwise go
            # unjudged (the mutation harness: a baseline whose summary leaves the suite out whole).
            findings.append(
                Finding(
                    INCOMPLETE,
                    f"{suite}: scored on the candidate and not in the baseline: nothing to compare it with; store a "
                    f"baseline that ran the {suite} suite, or leave it out of the candidate",
                    suite,
                )
            )
        elif suite not in cand_suites:
            findings.append(
                Finding(INCOMPLETE, f"{suite}: scored on the baseline but not on the candidate: run the {suite} suite")
            )
        else:
            _compare_suite(baseline, candidate, suite, settings, result, findings)
    _adjust_for_the_family(result)
    findings += _statistical_findings(result)
    result.regressions = _check_regressions(baseline, candidate)
    for regression in result.regressions:
        findings.append(
            Finding(FAIL, f"{regression.suite}/{regression.check} passes on the baseline and fails on the candidate")
        )
    findings += _missing_conformance(baseline, candidate)
    findings += _partial_baseline(baseline)
    findings += _changed_items(baseline, candidate)
    result.shape = _shape_finding(baseline, candidate)
    for suite in result.shape.missing_in_baseline:
        findings.append(
            Finding(
                INCOMPLETE,
                f"the deployment differs from the baseline's, and the baseline has no {suite} suite: store a "
                f"baseline that ran it (--k3-save-baseline)",
            )
        )
    for suite in result.shape.missing_suites:
        findings.append(
            Finding(
                INCOMPLETE,
                f"the deployment differs from the baseline's, and the {suite} suite did not run on the candidate",
            )
        )
    for difference in settings_differences(baseline.summary, candidate.summary):
        if difference.split(":")[0] in settings.allow_differences:
            result.notes.append(f"differs from the baseline, allowed on purpose (--k3-allow-differences): {difference}")
        else:
            findings.append(
                Finding(
                    INCOMPLETE,
                    f"the candidate ran under other settings than the baseline ({difference}): rerun it with the "
                    "baseline's, or declare the difference with --k3-allow-differences",
                )
            )
    if candidate.summary["status"] != STATUS_COMPLETE:
        findings.append(
            Finding(
                INCOMPLETE, f"the candidate run is {candidate.summary['status']}: rerun with --k3-resume to finish it"
            )
        )
    if not result.accuracy and not _conformance_suites(baseline, candidate):
        findings.append(Finding(INCOMPLETE, "the runs share no suite: nothing was compared"))
    stored_policy = baseline.summary.get("policy")
    weaker = settings.weaker_than(stored_policy) if stored_policy else []
    if weaker:
        result.notes.append(f"judged under a weaker policy than the baseline's run: {', '.join(weaker)}")
    easier = [entry for entry, is_easier in settings.overrides() if is_easier]
    if easier:
        result.notes.append(f"judged under a weaker policy than the default: {', '.join(easier)}")
    if _declared_subset(baseline):
        result.notes.append(
            "the baseline is a subset of its datasets' items, stored so on purpose (--k3-subset-baseline): the "
            "verdict speaks for those items only"
        )
    if baseline.summary.get("simulator") != candidate.summary.get("simulator"):
        result.notes.append(
            "one run is against the reference deployment (a simulator) and the other is not: the comparison "
            "says nothing about either deployment"
        )
    settle(result, findings)
    return result


def _what_to_do(candidate: StoredRun) -> str:
    """How to get the missing items scored: a complete run (one a sequential rule stopped, too) has
    nothing left for a resume to send."""
    if candidate.path is not None and candidate.summary.get("status") == STATUS_COMPLETE:
        return "the run is complete, so a resume sends nothing more: score them in a new run"
    return "run them, or resume the run"


def _declared_subset(run: StoredRun) -> bool:
    selection = run.summary.get("selection")
    return bool(run.summary.get("subset_declared")) and selection is not None and selection["subset"]


def _compare_suite(
    baseline: StoredRun,
    candidate: StoredRun,
    suite: str,
    settings: GateSettings,
    result: GateResult,
    findings: list[Finding],
) -> None:
    before, after = baseline.item_totals(suite), candidate.item_totals(suite)
    scored = {item for item, totals in before.items() if totals.samples}
    compared = {item for item in scored if item in after and after[item].samples}
    coverage = Coverage(
        baseline_items=len(scored),
        compared=len(compared),
        absent=sum(1 for item in scored if item not in after),
        unscored=sum(1 for item in scored if item in after and not after[item].samples),
    )
    result.coverage[suite] = coverage
    missing = coverage.absent + coverage.unscored
    if missing and coverage.share < settings.min_coverage:
        findings.append(
            Finding(
                INCOMPLETE,
                f"{suite}: the candidate scored {coverage.compared} of the baseline's {coverage.baseline_items} items "
                f"({coverage.absent} absent, {coverage.unscored} with no sample), under the "
                f"{settings.min_coverage:.0%} required (--k3-min-coverage): {_what_to_do(candidate)}",
                suite,
                ABOUT_COVERAGE,
            )
        )
    elif missing:
        result.notes.append(
            f"{suite}: {missing} of the baseline's {coverage.baseline_items} items not scored on the candidate "
            f"({coverage.absent} absent, {coverage.unscored} with no sample), within --k3-min-coverage"
        )
    extra = sum(1 for item, totals in after.items() if totals.samples and item not in scored)
    if extra and _declared_subset(baseline):
        result.notes.append(f"{suite}: {extra} candidate items not in the baseline's declared subset; not compared")
    elif extra:
        # Same datasets (checked before), a complete baseline of every item: a candidate item the
        # baseline has no score for means the baseline lost items (an edited or partial baseline
        # would otherwise hide the candidate's losses on them).
        findings.append(
            Finding(
                INCOMPLETE,
                f"{suite}: the candidate scored {extra} items the baseline has no score for: the baseline is "
                "partial; store a complete one",
                # Not a coverage finding: a sequential stop excuses the candidate's missing items, not the baseline's.
                suite,
            )
        )
    comparison = compare_scores(
        {item: before[item] for item in compared},
        {item: after[item] for item in compared},
        margin=settings.margin_of(suite),
        alpha=settings.alpha,
    )
    if comparison is None:
        findings.append(Finding(INCOMPLETE, f"{suite}: the runs share no scored item", suite))
        return
    result.accuracy[suite] = comparison
    for name, event in RATE_EVENTS.items():
        before_counts = baseline.event_samples(suite, event, compared)
        after_counts = candidate.event_samples(suite, event, compared)
        rate = compare_rates_by_item(
            name,
            [(before_counts[item], after_counts[item]) for item in sorted(compared)],
            floor=settings.floor_of(name),
            alpha=settings.alpha,
            margin=settings.margin_of(suite),
        )
        result.rates.setdefault(suite, {})[name] = rate


def _adjust_for_the_family(result: GateResult) -> None:
    """Holm over the FAIL side of every statistical test of this gate."""
    keys: list[tuple[str, str | None]] = [(suite, None) for suite in result.accuracy]
    keys += [(suite, name) for suite, rates in result.rates.items() for name in rates]
    p_values = [
        result.accuracy[suite].p_value if name is None else result.rates[suite][name].p_value for suite, name in keys
    ]
    for (suite, name), adjusted in zip(keys, holm(p_values), strict=True):
        if name is None:
            result.accuracy[suite] = result.accuracy[suite].adjusted(adjusted, tests=len(keys))
        else:
            result.rates[suite][name] = result.rates[suite][name].adjusted(adjusted)


def _statistical_findings(result: GateResult) -> list[Finding]:
    findings = [_accuracy_finding(suite, comparison) for suite, comparison in sorted(result.accuracy.items())]
    findings += [_rate_finding(suite, rate) for suite, rates in sorted(result.rates.items()) for rate in rates.values()]
    return [finding for finding in findings if finding is not None]


def _accuracy_finding(suite: str, comparison: ScoreComparison) -> Finding | None:
    change = _points(comparison.difference)
    if comparison.verdict == FAIL:
        margin = _points(comparison.margin, sign=False)
        return Finding(
            FAIL,
            f"{suite}: accuracy {change} beyond the {margin} margin (p = {comparison.p_value:.2g}, "
            f"Holm-adjusted {comparison.adjusted_p_value:.2g})",
            suite,
            ABOUT_ACCURACY,
        )
    if comparison.verdict == INCONCLUSIVE:
        interval = f"[{_points(comparison.lower)}, {_points(comparison.upper)}]"
        detectable = _points(comparison.min_detectable_drop, sign=False)
        return Finding(
            INCONCLUSIVE,
            f"{suite}: accuracy {change} {interval}"
            + (f" ({comparison.not_fail_because})" if comparison.not_fail_because else "")
            + f"; drops under {detectable} cannot be detected with {comparison.items} items; {comparison.to_decide}",
            suite,
            ABOUT_ACCURACY,
        )
    return None


def _rate_finding(suite: str, rate: RateComparison) -> Finding | None:
    change = f"{suite}: {rate.name} rate {rate.baseline_rate:.1%} → {rate.candidate_rate:.1%}"
    if rate.verdict == FAIL:
        text = f"{change} (p = {rate.p_value:.2g}, Holm-adjusted {rate.adjusted_p_value:.2g})"
        return Finding(FAIL, text, suite, ABOUT_RATE)
    if rate.verdict == INCONCLUSIVE:
        return Finding(
            INCONCLUSIVE,
            f"{change}, above the {rate.floor:.0%} floor and not shown to be higher (adjusted p = "
            f"{rate.adjusted_p_value:.2g}), and up to {rate.upper:.1%} cannot be ruled out "
            f"({_material_bar(rate)})",
            suite,
            ABOUT_RATE,
        )
    return None


def _material_bar(rate: RateComparison) -> str:
    if rate.baseline_rate > rate.floor:
        return f"the baseline's {rate.baseline_rate:.1%} + margin {rate.margin:.0%}: {rate.material:.1%}"
    return f"floor + margin {rate.material:.0%}"


def _conformance_suites(baseline: StoredRun, candidate: StoredRun) -> set[str]:
    return {
        suite
        for suite in baseline.suites.keys() & candidate.suites.keys()
        if baseline.suites[suite].get("checks") and candidate.suites[suite].get("checks")
    }


def _partial_baseline(baseline: StoredRun) -> list[Finding]:
    """A baseline that does not hold the scores its own summary says it selected: items of a scored
    suite listed in its datasets without a score, or a suite it records with no evidence at all
    (no score, no check). An edited or partial baseline would otherwise let a candidate leave out
    exactly those items."""
    findings = []
    scored = baseline.scored_suites()
    for suite, entry in sorted(baseline.suites.items()):
        if not entry.get("scores") and not entry.get("checks"):
            findings.append(
                Finding(INCOMPLETE, f"{suite}: the baseline records the suite with no score and no check", suite)
            )
    for suite, dataset in sorted(baseline.summary.get("datasets", {}).items()):
        if suite not in scored:
            continue
        totals = baseline.item_totals(suite)
        missing = [item for item in dataset.get("items", []) if item not in totals or not totals[item].samples]
        if missing:
            findings.append(
                Finding(
                    INCOMPLETE,
                    f"{suite}: the baseline selected {len(missing)} items it has no score for (such as "
                    f"{missing[0]}): the baseline is partial; store a complete one",
                    suite,
                )
            )
    return findings


def _changed_items(baseline: StoredRun, candidate: StoredRun) -> list[Finding]:
    """Whether each suite scored on both sides asked the same items (issue 21, reproduction 9):
    a side that records no dataset for the suite, a dataset whose content hash changed, an item
    whose content hash changed, or a dataset without a hash where no item hashes stand in for it
    is INCOMPLETE: scores on other questions cannot be compared."""
    findings = []
    for suite in sorted(baseline.scored_suites() & candidate.scored_suites()):
        sides = [(run.dataset_sources().get(suite, {}), _item_hashes(run, suite)) for run in (baseline, candidate)]
        (sources_before, items_before), (sources_after, items_after) = sides
        unrecorded = [
            name
            for name, (sources, items) in zip(("baseline", "candidate"), sides, strict=True)
            if not sources and not items
        ]
        if unrecorded:
            findings.append(
                Finding(
                    INCOMPLETE,
                    f"{suite}: the {' and the '.join(unrecorded)} run records no dataset for the suite: nothing "
                    "shows both asked the same items",
                    suite,
                )
            )
            continue
        changed_sources = sorted(
            name
            for name in sources_before.keys() & sources_after.keys()
            if sources_before[name] and sources_after[name] and sources_before[name] != sources_after[name]
        )
        if changed_sources:
            findings.append(
                Finding(
                    INCOMPLETE,
                    f"{suite}: dataset {', '.join(changed_sources)} has changed since the baseline (content hash "
                    "differs): store a new baseline",
                    suite,
                )
            )
        if items_before and items_after:
            changed = sorted(
                item for item in items_before.keys() & items_after.keys() if items_before[item] != items_after[item]
            )
            if changed:
                findings.append(
                    Finding(
                        INCOMPLETE,
                        f"{suite}: {len(changed)} items ask something else than on the baseline (such as "
                        f"{changed[0]}: content hash differs): store a new baseline",
                        suite,
                    )
                )
        elif not all(sources_before.values()) or not all(sources_after.values()):
            findings.append(
                Finding(
                    INCOMPLETE,
                    f"{suite}: a dataset without a content hash and no item hashes on both sides: nothing shows "
                    "both asked the same items",
                    suite,
                )
            )
    return findings


def _item_hashes(run: StoredRun, suite: str) -> Mapping[str, str]:
    entry = run.summary.get("datasets", {}).get(suite) or {}
    return entry.get("item_sha256") or {}


def _missing_conformance(baseline: StoredRun, candidate: StoredRun) -> list[Finding]:
    """The baseline's conformance evidence the candidate does not have: a suite with checks that
    is missing (left out with --ignore, renamed in the summary), a check the baseline passed that
    is missing, or that never passed nor failed on the candidate (every test errored or was
    skipped). Each is INCOMPLETE: a check that cannot run is not a check that passes."""
    findings = []
    for suite in sorted(baseline.suites):
        before = baseline.suites[suite].get("checks") or {}
        if not before or suite in baseline.scored_suites():
            continue
        after = candidate.suites[suite].get("checks") or {} if suite in candidate.suites else {}
        if not after:
            findings.append(
                Finding(
                    INCOMPLETE,
                    f"{suite}: the baseline ran its {len(before)} checks and the candidate ran none: run the "
                    f"{suite} suite",
                    suite,
                )
            )
            continue
        for check in sorted(before):
            was, now = before[check], after.get(check)
            if not was.get("passed", 0) or was.get("failed", 0):
                continue
            if now is None:
                findings.append(
                    Finding(
                        INCOMPLETE, f"{suite}/{check} passes on the baseline and did not run on the candidate", suite
                    )
                )
            elif not now.get("passed", 0) and not now.get("failed", 0):
                findings.append(
                    Finding(
                        INCOMPLETE,
                        f"{suite}/{check} passes on the baseline and neither passed nor failed on the candidate "
                        f"({now.get('errors', 0)} errors, {now.get('infra_errors', 0)} infrastructure errors)",
                        suite,
                    )
                )
    return findings


def _check_regressions(baseline: StoredRun, candidate: StoredRun) -> list[CheckRegression]:
    regressions = []
    for suite in sorted(_conformance_suites(baseline, candidate)):
        before = baseline.suites[suite]["checks"]
        after = candidate.suites[suite]["checks"]
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
        shape = read_run_shape(run.summary["shape"], run.summary.get("server_info"), run.summary.get("launch"))
        shown = (
            f"{run.summary['shape']}: {shape.described} (from {shape.source})"
            if shape.settings
            else f"{run.summary['shape']}: settings unknown"
        )
        identity = deployment_identity(run.summary.get("server_info"), run.summary.get("launch"))
        sides.append((shape, shown, identity))
    (base_shape, base_shown, base_identity), (cand_shape, cand_shown, cand_identity) = sides
    identity_differences = deployment_differences(base_identity, cand_identity)
    base_llamacpp, cand_llamacpp = (
        llamacpp_deployment(run.summary.get("server_info"), run.summary.get("launch")) for run in (baseline, candidate)
    )
    if base_llamacpp is not None and cand_llamacpp is not None:
        base_shown = f"{baseline.summary['shape']}: {base_llamacpp.described}"
        cand_shown = f"{candidate.summary['shape']}: {cand_llamacpp.described}"
        decision = llamacpp_policy(
            base_llamacpp,
            cand_llamacpp,
            identity_differences,
            models=[run.summary.get("model") for run in (baseline, candidate)],
            baseline_suites=baseline.scored_suites(),
        )
    else:
        decision = shape_policy(base_shape.settings, cand_shape.settings, identity_differences)
    missing = tuple(suite for suite in decision.required_suites if suite not in candidate.scored_suites())
    missing_in_baseline = tuple(suite for suite in decision.required_suites if suite not in baseline.scored_suites())
    return ShapeFinding(
        baseline=base_shown,
        candidate=cand_shown,
        differences=decision.differs,
        required_suites=decision.required_suites,
        missing_suites=missing,
        missing_in_baseline=missing_in_baseline,
        contradictions=cand_shape.contradictions,
    )


def _points(share: float, *, sign: bool = True) -> str:
    return f"{share * 100:+.1f} pts" if sign else f"{share * 100:.1f} pts"
