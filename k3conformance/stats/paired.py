"""Paired statistics for comparing a candidate run with a baseline run, item by item.

Items are the unit of sampling (Miller, "Adding Error Bars to Evals", arXiv 2411.00640):
both runs answer the same items, so the comparison works on the per-item differences
d_i = candidate_i - baseline_i (an item's score is the mean over its samples). Their mean
is the change in accuracy; its standard error already includes the correlation between
the runs: far tighter than comparing two independent accuracies.

The verdict, at one-sided level alpha with a margin m (points of accuracy a deployment
may lose without anyone caring):

- PASS: the data rule out a loss larger than the margin. With one binary sample per item,
  Tango's score test of H0 "change <= -m" (Tango 1998, "Equivalence test and confidence
  interval for the difference in proportions for the paired-sample design", Stat Med
  17:891, with a quarter-item continuity correction) rejects at alpha: its variance uses the maximum-likelihood estimate constrained
  to a change of exactly -m, which keeps the wrong-PASS rate at or under alpha at every
  share of discordant items (the unconstrained Wald interval reached 13% at 3% discordant
  items; tests/unit/gate/test_gate_calibration.py enumerates it exactly). With several samples per
  item, a plain paired t test on the item means (standard error clustered by item).
- FAIL: the data show a loss larger than the margin: the test of H0 "change >= -m" rejects
  at alpha AND the upper bound of the interval is below -m. With one binary sample per item
  the test is an exact McNemar test with the margin (conditional on the b + c discordant
  items, b ~ Binomial(b + c, (1 + m n / (b + c)) / 2) under H0, where b counts the items only
  the baseline got right); otherwise the paired t test. Testing against -m rather than 0
  keeps a loss inside the margin from failing. Across the tests of one gate the FAIL side
  is Holm-adjusted (`holm`), so a healthy candidate fails the whole gate at most alpha of
  the time, however many suites and rates it compares.
- INCONCLUSIVE: neither. The report says how many items, at the observed spread, would
  decide it, and prints the minimum detectable drop.

The interval shown is the inversion of the PASS test: Tango's score interval for binary
items, the t interval otherwise. When every item agrees exactly (no spread at all), the
t interval falls back to Agresti and Min's pseudo-observations (half a discordant item
each way and one agreeing item), so that a handful of identical items is not a PASS.

The minimum detectable drop is the true loss the FAIL rule catches with 80% power at this
size and spread: m + (z_{1-alpha} + z_0.8) * SE; "about N more items" plans at the same
80% power. About a hundred long coding tasks can only catch large losses: most healthy
comparisons of that size are INCONCLUSIVE, and the report says so rather than calling them
a PASS.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from statistics import NormalDist
from typing import Any, Literal

from scipy import stats

Verdict = Literal["PASS", "FAIL", "INCONCLUSIVE"]
PASS: Verdict = "PASS"
FAIL: Verdict = "FAIL"
INCONCLUSIVE: Verdict = "INCONCLUSIVE"
POWER = 0.8
# Beyond this many times the current number of items, a planning figure is no plan.
_UNREACHABLE_FACTOR = 100
# Bisection steps of the score interval: 2^-60 of the range is far below any shown digit.
_BISECTION_STEPS = 60
_CONTINUITY = 0.25
# Items that must differ before the paired t's own spread is trusted (the usual "ten events" of a
# normal approximation to a count); under it the spread is floored (too_few_disagreeing).
MIN_DISAGREEING = 10
TANGO = "Tango score test for PASS, exact McNemar for FAIL (one sample per item)"
PAIRED_T = "paired t on item means, SE clustered by item"


@dataclass(frozen=True)
class ItemTotals:
    """One item's samples in one run: how many, and the sum of their scores (0..1 each)."""

    samples: int
    correct: float

    @property
    def mean(self) -> float:
        return self.correct / self.samples

    @property
    def binary(self) -> bool:
        return self.samples == 1 and self.correct in (0.0, 1.0)


@dataclass(frozen=True)
class ScoreComparison:
    """A suite's accuracy, candidate against baseline, on the items both runs scored."""

    items: int
    baseline_only: int
    candidate_only: int
    baseline: float
    candidate: float
    difference: float
    # One-sided (1 - alpha) bounds of the change; together a (1 - 2 alpha) interval.
    lower: float
    upper: float
    standard_error: float
    method: str
    # Items only the baseline got right / only the candidate got right (binary items only).
    baseline_only_right: int | None
    candidate_only_right: int | None
    # p-value of H0 "change >= -margin" (small: a loss beyond the margin), alone and
    # Holm-adjusted over every test of the gate (equal when it is the only test).
    p_value: float
    adjusted_p_value: float
    margin: float
    alpha: float
    min_detectable_drop: float
    verdict: Verdict
    # For INCONCLUSIVE: what would decide it.
    to_decide: str | None
    # Why the verdict is not FAIL though the interval lies wholly beyond the margin (the
    # interval is the unadjusted one-sided pair; FAIL needs the p-value too): None otherwise.
    not_fail_because: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def adjusted(self, adjusted_p_value: float, tests: int = 1) -> ScoreComparison:
        """The same comparison with its FAIL test at a p-value Holm-adjusted over `tests` tests."""
        verdict = _score_verdict(self.lower, self.upper, adjusted_p_value, self.margin, self.alpha)
        to_decide = self.to_decide
        if verdict == INCONCLUSIVE and to_decide is None:
            to_decide = _to_decide(self.difference, self.standard_error, self.items, self.margin, self.alpha)
        because = _not_fail_because(
            verdict, self.upper, self.margin, self.p_value, adjusted_p_value, self.alpha, self.method, tests
        )
        return replace(
            self, adjusted_p_value=adjusted_p_value, verdict=verdict, to_decide=to_decide, not_fail_because=because
        )


def _not_fail_because(
    verdict: Verdict,
    upper: float,
    margin: float,
    p_value: float,
    adjusted_p_value: float,
    alpha: float,
    method: str,
    tests: int,
) -> str | None:
    """Why an interval wholly beyond the margin sits beside a verdict that is not FAIL. The
    interval is the plain one-sided (1 - alpha) pair; FAIL also needs the FAIL test's p-value,
    Holm-adjusted over the gate's tests, at or under alpha. None when they do not disagree."""
    if verdict == FAIL or upper >= -margin:
        return None
    test = "exact McNemar" if method == TANGO else "paired t"
    if p_value > alpha:
        return f"interval beyond the margin, but the loss is not shown: {test} p {p_value:.2g} > α {alpha:g}"
    return (
        f"interval beyond the margin before adjustment, but the loss is not shown: {test} p {p_value:.2g}, "
        f"Holm-adjusted over {tests} tests {adjusted_p_value:.2g} > α {alpha:g}"
    )


def compare_scores(
    baseline: Mapping[str, ItemTotals],
    candidate: Mapping[str, ItemTotals],
    *,
    margin: float,
    alpha: float,
) -> ScoreComparison | None:
    """Compare on the shared items with at least one sample on each side; None when there are none."""
    shared = sorted(
        item for item in baseline.keys() & candidate.keys() if baseline[item].samples and candidate[item].samples
    )
    if not shared:
        return None
    base = [baseline[item].mean for item in shared]
    cand = [candidate[item].mean for item in shared]
    count = len(shared)
    differences = [c - b for b, c in zip(base, cand, strict=True)]
    difference = sum(differences) / count
    error = planning_error(differences)
    binary = all(baseline[item].binary and candidate[item].binary for item in shared)
    baseline_right: int | None = None
    candidate_right: int | None = None
    if binary:
        baseline_right = sum(1 for b, c in zip(base, cand, strict=True) if b > c)
        candidate_right = sum(1 for b, c in zip(base, cand, strict=True) if c > b)
        lower, upper = tango_interval(baseline_right, candidate_right, count, alpha)
        p_value = mcnemar_p_beyond_margin(baseline_right, candidate_right, count, margin)
        method = TANGO
    else:
        lower, upper, p_value = _paired_t(differences, error, margin, alpha)
        method = PAIRED_T
    verdict = _score_verdict(lower, upper, p_value, margin, alpha)
    return ScoreComparison(
        items=count,
        baseline_only=len(baseline.keys() - candidate.keys()),
        candidate_only=len(candidate.keys() - baseline.keys()),
        baseline=sum(base) / count,
        candidate=sum(cand) / count,
        difference=difference,
        lower=lower,
        upper=upper,
        standard_error=error,
        method=method,
        baseline_only_right=baseline_right,
        candidate_only_right=candidate_right,
        p_value=p_value,
        adjusted_p_value=p_value,
        margin=margin,
        alpha=alpha,
        min_detectable_drop=margin + (_z(1 - alpha) + _z(POWER)) * error,
        verdict=verdict,
        to_decide=None if verdict != INCONCLUSIVE else _to_decide(difference, error, count, margin, alpha),
        not_fail_because=_not_fail_because(verdict, upper, margin, p_value, p_value, alpha, method, 1),
    )


def _score_verdict(lower: float, upper: float, fail_p_value: float, margin: float, alpha: float) -> Verdict:
    if lower > -margin:
        return PASS
    if fail_p_value <= alpha and upper < -margin:
        return FAIL
    return INCONCLUSIVE


def tango_statistic(baseline_right: int, candidate_right: int, items: int, change: float) -> float:
    """Tango's score statistic for H0 "candidate - baseline accuracy = change" on paired
    binary items, with a quarter-item continuity correction; large when the true change is
    above `change`."""
    b, c, n = baseline_right, candidate_right, items
    raw = c - b - n * change
    # A quarter of an item of continuity correction: the plain statistic reaches 5.03% wrong
    # PASS at 113 items and 22% discordant items (discreteness); this keeps it under alpha
    # over 41-500 items and 3-25% discordant items, at a loss of about 2 points of A/A PASS.
    numerator = math.copysign(max(abs(raw) - _CONTINUITY, 0.0), raw)
    # The share of baseline-only items under H0, by constrained maximum likelihood.
    quadratic_b = -(b + c) + (2 * n - c + b) * change
    quadratic_c = -b * change * (1 - change)
    root = (-quadratic_b + math.sqrt(max(quadratic_b**2 - 8 * n * quadratic_c, 0.0))) / (4 * n)
    variance = n * (2 * root + change * (1 - change))
    if variance <= 1e-15:
        return 0.0 if numerator == 0 else math.copysign(math.inf, numerator)
    return numerator / math.sqrt(variance)


def tango_interval(baseline_right: int, candidate_right: int, items: int, alpha: float) -> tuple[float, float]:
    """One-sided (1 - alpha) bounds of the change from inverting Tango's score test."""
    quantile = _z(1 - alpha)
    estimate = (candidate_right - baseline_right) / items

    def crossing(low: float, high: float, target: float) -> float:
        # The statistic falls as the hypothesised change rises: bisect for where it equals target.
        for _ in range(_BISECTION_STEPS):
            middle = (low + high) / 2
            if tango_statistic(baseline_right, candidate_right, items, middle) > target:
                low = middle
            else:
                high = middle
        return (low + high) / 2

    return crossing(-1.0, estimate, quantile), crossing(estimate, 1.0, -quantile)


def mcnemar_p_beyond_margin(baseline_right: int, candidate_right: int, items: int, margin: float) -> float:
    """Exact conditional McNemar p-value of H0 "change >= -margin" against a larger loss."""
    discordant = baseline_right + candidate_right
    if discordant == 0:
        return 1.0
    share_against = (1 + margin * items / discordant) / 2
    if share_against >= 1:
        # So few items disagree that a loss of the margin is impossible: nothing to reject.
        return 1.0
    return float(stats.binom.sf(baseline_right - 1, discordant, share_against))


def _paired_t(
    differences: list[float], fallback_error: float, margin: float, alpha: float
) -> tuple[float, float, float]:
    """The one-sided t bounds of the mean difference and the p-value of H0 "change >= -margin"."""
    count = len(differences)
    mean = sum(differences) / count
    spread = math.sqrt(sum((d - mean) ** 2 for d in differences) / (count - 1)) if count > 1 else 0.0
    standard_error = spread / math.sqrt(count)
    degrees = max(count - 1, 1)
    if standard_error < fallback_error and (too_few_disagreeing(differences) or standard_error == 0):
        # Little or no spread: the pseudo-observations' error, never a near-zero-width interval
        # (nor a division by zero where every item moved by the same amount).
        standard_error, degrees = fallback_error, count + 1
    quantile = float(stats.t.ppf(1 - alpha, degrees))
    p_value = float(stats.t.cdf((mean + margin) / standard_error, degrees))
    # The PASS bound with the skewness correction (skew_term); the FAIL bound as it is.
    needed = skew_corrected_quantile(quantile, skew_term(differences))
    lower = mean - needed * standard_error if math.isfinite(needed) else -1.0
    return lower, mean + quantile * standard_error, p_value


def skew_term(differences: Sequence[float]) -> float:
    """Johnson's (1978) skewness term a = γ / (6 √n) of the item differences, where it makes a
    PASS harder (a left-skewed mean: most items equal, a few losing), else 0.

    Against a baseline whose items are each always right or always wrong, every difference is
    zero or a loss, and the studentized mean's upper tail is heavier than t's: the plain t test
    passed a true loss of the margin 7 to 9% of the time at 300 items sampled 4 times, above α
    (benchmarks/bench_degenerate_pass.py). Edgeworth's expansion puts the error at
    a (2z² + 1) φ(z), which `skew_corrected` takes off."""
    count = len(differences)
    if count < 3:
        return 0.0
    mean = sum(differences) / count
    second = sum((d - mean) ** 2 for d in differences) / count
    if second <= 0:
        return 0.0
    third = sum((d - mean) ** 3 for d in differences) / count
    skewness: float = third / math.pow(second, 1.5)
    return min(skewness / (6 * math.sqrt(count)), 0.0)


def skew_corrected(statistic: float, skew: float) -> float:
    """Johnson's modified statistic t + a (1 + 2t²) on the PASS side (t > 0), a = `skew_term`;
    the FAIL side is left as it is (its tail is the lighter one there). Past the turning point
    t = −1 / (4a) the value is held at its maximum, so that stronger evidence never scores less."""
    if skew >= 0 or statistic <= 0:
        return statistic
    held = min(statistic, -1 / (4 * skew))
    return held + skew * (1 + 2 * held**2)


def skew_corrected_quantile(quantile: float, skew: float) -> float:
    """The plain statistic `skew_corrected` lifts to `quantile` (inf when it never gets there)."""
    if skew >= 0 or quantile <= 0:
        return quantile
    if quantile > skew_corrected(-1 / (4 * skew), skew):
        return math.inf
    return (-1 + math.sqrt(1 - 8 * skew * (skew - quantile))) / (4 * skew)


def too_few_disagreeing(differences: Sequence[float]) -> bool:
    """Whether too few items differ for the t statistic's spread to be trusted: then the error with
    pseudo-observations is the floor. A zero or tiny spread over few items is what a loss
    concentrated on a few items looks like until they show (issue 21: 8 items sampled 4 times
    against a baseline right on every sample, all equal, passed at a true loss of the margin 43%
    of the time); with many disagreeing items the plain clustered error holds (the floor would
    inflate it by up to 1.2 at 8 samples per item)."""
    return sum(1 for difference in differences if difference != 0) < MIN_DISAGREEING


def planning_error(differences: Sequence[float]) -> float:
    """Standard error of the mean difference with Agresti and Min's pseudo-observations (+1
    and -1 with weight 1/2 each, 0 with weight 1), so that items that all agree still have a
    spread to plan with: for the minimum detectable drop and "N more items"."""
    count = len(differences) + 2
    mean = sum(differences) / count
    squares = sum((d - mean) ** 2 for d in differences) + 0.5 * (1 - mean) ** 2 + 0.5 * (1 + mean) ** 2 + mean**2
    return math.sqrt(squares / (count - 1) / count)


def _to_decide(difference: float, standard_error: float, count: int, margin: float, alpha: float) -> str:
    """How many items, at the spread seen so far, would decide it with 80% power (the power
    of the minimum detectable drop) if the observed difference is the true one."""
    spread = standard_error * math.sqrt(count + 2)
    distance = abs(difference + margin)
    if spread == 0 or distance == 0:
        return "the estimate sits on the margin: no number of items decides it"
    needed = math.ceil(((_z(1 - alpha) + _z(POWER)) * spread / distance) ** 2)
    outcome = "PASS" if difference > -margin else "FAIL"
    if needed > _UNREACHABLE_FACTOR * count:
        return f"about {needed} items at this spread would be needed to call it a {outcome}: more than can be afforded"
    return (
        f"about {max(needed - count, 1)} more items at this spread would make it a {outcome} 4 times in 5, "
        "if the difference holds"
    )


@lru_cache(maxsize=64)
def _z(probability: float) -> float:
    return NormalDist().inv_cdf(probability)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (family-wise error at most alpha for any alpha),
    in the order given."""
    order = sorted(range(len(p_values)), key=lambda index: p_values[index])
    adjusted = [1.0] * len(p_values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(p_values) - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


@dataclass(frozen=True)
class RateComparison:
    """How often something bad happens (looping, truncation), candidate against baseline: with
    one sample per item, the items where it happened, out of the items; with more
    (`compare_rates_by_item`), the sum over items of the share of each item's outputs with it,
    so the counts may be fractional."""

    name: str
    baseline_events: float
    baseline_items: int
    candidate_events: float
    candidate_items: int
    # One-sided Fisher exact p-value that the candidate's rate is higher, alone and
    # Holm-adjusted over every test of the gate.
    p_value: float
    adjusted_p_value: float
    # One-sided (1 - alpha) Clopper-Pearson upper bound of the candidate's rate.
    upper: float
    floor: float
    # How far over the floor the rate may be before a rise that is not shown still matters.
    margin: float
    alpha: float
    verdict: Verdict
    # "fisher" on items with the event (one sample per item on both sides), or "paired t" on the
    # share of each item's outputs with it (more samples).
    test: str = "fisher"

    @property
    def baseline_rate(self) -> float:
        return self.baseline_events / self.baseline_items if self.baseline_items else 0.0

    @property
    def candidate_rate(self) -> float:
        return self.candidate_events / self.candidate_items if self.candidate_items else 0.0

    @property
    def material(self) -> float:
        return material_rate(self.floor, self.baseline_rate, self.margin)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "baseline_rate": self.baseline_rate, "candidate_rate": self.candidate_rate}

    def adjusted(self, adjusted_p_value: float) -> RateComparison:
        verdict = _rate_verdict(
            adjusted_p_value, self.candidate_rate, self.baseline_rate, self.upper, self.floor, self.margin, self.alpha
        )
        return replace(self, adjusted_p_value=adjusted_p_value, verdict=verdict)


def compare_rates(
    name: str,
    baseline: tuple[int, int],
    candidate: tuple[int, int],
    *,
    floor: float,
    alpha: float,
    margin: float = 0.03,
) -> RateComparison:
    """FAIL when the candidate's rate is significantly higher (one-sided Fisher exact test)
    and above the absolute floor: a significant rise from 0.1% to 0.3% is not a regression
    anyone should stop a release for. INCONCLUSIVE when it is not FAIL, the rate rose, and
    its upper bound is above `material_rate`: a material rate cannot be ruled out. PASS
    otherwise."""
    base_events, base_items = baseline
    cand_events, cand_items = candidate
    table = [[cand_events, cand_items - cand_events], [base_events, base_items - base_events]]
    p_value = float(stats.fisher_exact(table, alternative="greater").pvalue) if base_items and cand_items else 1.0
    upper = _rate_upper_bound(cand_events, cand_items, alpha)
    rate = cand_events / cand_items if cand_items else 0.0
    base_rate = base_events / base_items if base_items else 0.0
    verdict = _rate_verdict(p_value, rate, base_rate, upper, floor, margin, alpha)
    return RateComparison(
        name, base_events, base_items, cand_events, cand_items, p_value, p_value, upper, floor, margin, alpha, verdict
    )


def compare_rates_by_item(
    name: str,
    counts: Sequence[tuple[tuple[int, int], tuple[int, int]]],
    *,
    floor: float,
    alpha: float,
    margin: float = 0.03,
) -> RateComparison:
    """`compare_rates` on items given as ((baseline events, samples), (candidate events, samples)).

    With one sample of every item on both sides, Fisher's exact test on the items with the event.
    With more, the rate is the share of an item's outputs with the event, averaged over the items,
    and the rise is tested with a one-sided paired t test on those per-item shares (items are the
    independent units; the pairing takes out how much items differ). "Items with it in any
    sample" was not comparable across sample counts: an item truncated in a third of its outputs
    is truncated somewhere in 4 samples 80% of the time and in 8 samples 96%, so a candidate at 8
    samples looked worse than a baseline at 4 by construction (an A/A pair on llama.cpp at
    temperature 1 FAILed on truncation, 233 of 342 items against 301), and a candidate at 1
    sample hid a rise behind a baseline's 4."""
    if all(base[1] == cand[1] == 1 for base, cand in counts):
        base_events = sum(base[0] > 0 for base, _ in counts)
        cand_events = sum(cand[0] > 0 for _, cand in counts)
        return compare_rates(
            name, (base_events, len(counts)), (cand_events, len(counts)), floor=floor, alpha=alpha, margin=margin
        )
    baseline = [hits / samples if samples else 0.0 for (hits, samples), _ in counts]
    candidate = [hits / samples if samples else 0.0 for _, (hits, samples) in counts]
    items = len(counts)
    p_value, upper = _paired_rise(baseline, candidate, alpha)
    rate = sum(candidate) / items if items else 0.0
    base_rate = sum(baseline) / items if items else 0.0
    verdict = _rate_verdict(p_value, rate, base_rate, upper, floor, margin, alpha)
    return RateComparison(
        name,
        sum(baseline),
        items,
        sum(candidate),
        items,
        p_value,
        p_value,
        upper,
        floor,
        margin,
        alpha,
        verdict,
        test="paired t",
    )


def _paired_rise(baseline: Sequence[float], candidate: Sequence[float], alpha: float) -> tuple[float, float]:
    """One-sided paired t test of "the candidate's mean is higher": its p-value, and the
    (1 - alpha) upper bound of the candidate's mean."""
    count = len(candidate)
    if count == 0:
        return 1.0, 1.0
    differences = [after - before for before, after in zip(baseline, candidate, strict=True)]
    mean = sum(differences) / count
    degrees = max(count - 1, 1)
    quantile = float(stats.t.ppf(1 - alpha, degrees))
    level = sum(candidate) / count
    level_spread = math.sqrt(sum((x - level) ** 2 for x in candidate) / degrees) if count > 1 else 0.0
    upper = min(1.0, level + quantile * level_spread / math.sqrt(count)) if count > 1 else 1.0
    spread = math.sqrt(sum((d - mean) ** 2 for d in differences) / degrees) if count > 1 else 0.0
    if spread == 0.0:
        return (0.0 if mean > 0 else 1.0), upper
    return float(stats.t.sf(mean / (spread / math.sqrt(count)), degrees)), upper


def _rate_verdict(
    p_value: float, rate: float, base_rate: float, upper: float, floor: float, margin: float, alpha: float
) -> Verdict:
    if p_value <= alpha and rate > floor:
        return FAIL
    if rate > base_rate and upper > material_rate(floor, base_rate, margin):
        return INCONCLUSIVE
    return PASS


def material_rate(floor: float, base_rate: float, margin: float) -> float:
    """The rate a rise not shown must rule out: the margin over the floor, or over the baseline's
    own rate where that is higher (as the sequential monitors' null, `monitored_floor`): a
    baseline that truncates 68% of its items is not a deployment a 5% floor can judge."""
    return max(floor, base_rate) + margin


def _rate_upper_bound(events: int, items: int, alpha: float) -> float:
    if not items:
        return 1.0
    if events >= items:
        return 1.0
    return float(stats.beta.ppf(1 - alpha, events + 1, items - events))
