"""Paired statistics for comparing a candidate run with a baseline run, item by item.

Items are the unit of sampling (Miller, "Adding Error Bars to Evals", arXiv 2411.00640):
both runs answer the same items, so the comparison works on the per-item differences
d_i = candidate_i - baseline_i (an item's score is the mean over its samples). Their mean
is the change in accuracy, and its standard error, sd(d) / sqrt(n), is clustered by item
and already includes the correlation between the runs: far tighter than comparing two
independent accuracies.

The verdict, at one-sided level alpha with a margin m (points of accuracy a deployment
may lose without anyone caring):

- PASS: the lower bound of the one-sided (1 - alpha) interval of the change is above -m,
  i.e. the data rule out a loss larger than the margin.
- FAIL: the data show a loss larger than the margin: the test of H0 "change >= -m" rejects
  at alpha AND the upper bound of the interval is below -m. With one sample per binary
  item the test is an exact McNemar test with the margin (conditional on the b + c
  discordant items, b ~ Binomial(b + c, (1 + m n / (b + c)) / 2) under H0, where b counts
  the items only the baseline got right); otherwise a one-sided t test on the d_i. Testing
  against -m rather than 0 is what keeps a loss inside the margin from failing: a
  deployment 2.6 points down with a 3-point margin fails at most about alpha of the time.
- INCONCLUSIVE: neither. The report says how many items, at the observed spread, would
  decide it, and prints the minimum detectable drop.

The interval is a t interval on the d_i with Agresti and Min's pseudo-observations (half
a discordant item each way and one agreeing item, the "adjusted Wald" interval for paired
proportions): without them, a handful of items that all agree would have a zero-width
interval and PASS.

The minimum detectable drop is the true loss the FAIL rule catches with 80% power at this
size and spread: m + (z_{1-alpha} + z_0.8) * SE. About a hundred long coding tasks can
only catch large losses: most healthy comparisons of that size are INCONCLUSIVE, and the
report says so rather than calling them a PASS.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from scipy import stats

Verdict = Literal["PASS", "FAIL", "INCONCLUSIVE"]
PASS: Verdict = "PASS"
FAIL: Verdict = "FAIL"
INCONCLUSIVE: Verdict = "INCONCLUSIVE"
POWER = 0.8
# Beyond this many times the current number of items, a planning figure is no plan.
_UNREACHABLE_FACTOR = 100


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
    # p-value of H0 "change >= -margin" (small: a loss beyond the margin).
    p_value: float
    margin: float
    alpha: float
    min_detectable_drop: float
    verdict: Verdict
    # For INCONCLUSIVE: what would decide it.
    to_decide: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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
    lower, upper, standard_error = _adjusted_interval(differences, alpha)
    binary = all(baseline[item].binary and candidate[item].binary for item in shared)
    baseline_right: int | None = None
    candidate_right: int | None = None
    if binary:
        baseline_right = sum(1 for b, c in zip(base, cand, strict=True) if b > c)
        candidate_right = sum(1 for b, c in zip(base, cand, strict=True) if c > b)
        p_value = _mcnemar_p_beyond_margin(baseline_right, candidate_right, count, margin)
        method = "exact McNemar (one sample per item)"
    else:
        p_value = _t_p_beyond_margin(difference, standard_error, count, margin)
        method = "paired t, SE clustered by item"
    if lower > -margin:
        verdict: Verdict = PASS
    elif p_value <= alpha and upper < -margin:
        verdict = FAIL
    else:
        verdict = INCONCLUSIVE
    detectable = margin + (_z(1 - alpha) + _z(POWER)) * standard_error
    return ScoreComparison(
        items=count,
        baseline_only=len(baseline.keys() - candidate.keys()),
        candidate_only=len(candidate.keys() - baseline.keys()),
        baseline=sum(base) / count,
        candidate=sum(cand) / count,
        difference=difference,
        lower=lower,
        upper=upper,
        standard_error=standard_error,
        method=method,
        baseline_only_right=baseline_right,
        candidate_only_right=candidate_right,
        p_value=p_value,
        margin=margin,
        alpha=alpha,
        min_detectable_drop=detectable,
        verdict=verdict,
        to_decide=None if verdict != INCONCLUSIVE else _to_decide(difference, standard_error, count, margin, alpha),
    )


def _adjusted_interval(differences: list[float], alpha: float) -> tuple[float, float, float]:
    """One-sided (1 - alpha) bounds and the standard error of the mean difference, with
    Agresti and Min's pseudo-observations: +1 and -1 with weight 1/2 each, 0 with weight 1."""
    count = len(differences) + 2
    total = sum(differences)
    mean = total / count
    squares = sum((d - mean) ** 2 for d in differences) + 0.5 * (1 - mean) ** 2 + 0.5 * (1 + mean) ** 2 + mean**2
    standard_error = math.sqrt(squares / (count - 1) / count)
    quantile = float(stats.t.ppf(1 - alpha, count - 1))
    return mean - quantile * standard_error, mean + quantile * standard_error, standard_error


def _mcnemar_p_beyond_margin(baseline_right: int, candidate_right: int, items: int, margin: float) -> float:
    """Exact conditional McNemar p-value of H0 "change >= -margin" against a larger loss."""
    discordant = baseline_right + candidate_right
    if discordant == 0:
        return 1.0
    share_against = (1 + margin * items / discordant) / 2
    if share_against >= 1:
        # So few items disagree that a loss of the margin is impossible: nothing to reject.
        return 1.0
    return float(stats.binom.sf(baseline_right - 1, discordant, share_against))


def _t_p_beyond_margin(difference: float, standard_error: float, items: int, margin: float) -> float:
    if standard_error == 0:
        return 0.0 if difference < -margin else 1.0
    return float(stats.t.cdf((difference + margin) / standard_error, max(items - 1, 1)))


def _to_decide(difference: float, standard_error: float, count: int, margin: float, alpha: float) -> str:
    """How many more items, at the spread seen so far, would move the interval off the margin."""
    # The per-item spread behind the standard error (pseudo-observations included, so
    # that items that all agree still have a spread to plan with).
    spread = standard_error * math.sqrt(count + 2)
    distance = abs(difference + margin)
    if spread == 0 or distance == 0:
        return "the estimate sits on the margin: no number of items decides it"
    needed = math.ceil((_z(1 - alpha) * spread / distance) ** 2)
    outcome = "PASS" if difference > -margin else "FAIL"
    if needed > _UNREACHABLE_FACTOR * count:
        return f"about {needed} items at this spread would be needed to call it a {outcome}: more than can be afforded"
    return (
        f"about {max(needed - count, 1)} more items at this spread would make it a {outcome}, if the difference holds"
    )


def _z(probability: float) -> float:
    return float(stats.norm.ppf(probability))


@dataclass(frozen=True)
class RateComparison:
    """How often something bad happens (looping, truncation), candidate against baseline:
    items where it happened in at least one sample, out of the items."""

    name: str
    baseline_events: int
    baseline_items: int
    candidate_events: int
    candidate_items: int
    # One-sided Fisher exact p-value that the candidate's rate is higher.
    p_value: float
    floor: float
    alpha: float
    verdict: Verdict

    @property
    def baseline_rate(self) -> float:
        return self.baseline_events / self.baseline_items if self.baseline_items else 0.0

    @property
    def candidate_rate(self) -> float:
        return self.candidate_events / self.candidate_items if self.candidate_items else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "baseline_rate": self.baseline_rate, "candidate_rate": self.candidate_rate}


def compare_rates(
    name: str,
    baseline: tuple[int, int],
    candidate: tuple[int, int],
    *,
    floor: float,
    alpha: float,
) -> RateComparison:
    """FAIL when the candidate's rate is significantly higher (one-sided Fisher exact test)
    and above the absolute floor: a significant rise from 0.1% to 0.3% is not a regression
    anyone should stop a release for. PASS otherwise: a rate that did not rise significantly
    and stays under the floor, or any rate that is not higher than the baseline's."""
    base_events, base_items = baseline
    cand_events, cand_items = candidate
    table = [[cand_events, cand_items - cand_events], [base_events, base_items - base_events]]
    p_value = float(stats.fisher_exact(table, alternative="greater").pvalue) if base_items and cand_items else 1.0
    rate = cand_events / cand_items if cand_items else 0.0
    if p_value <= alpha and rate > floor:
        verdict: Verdict = FAIL
    elif rate > floor and base_items and rate > base_events / base_items:
        # Above the floor and higher than the baseline, but not significantly: say so.
        verdict = INCONCLUSIVE
    else:
        verdict = PASS
    return RateComparison(name, base_events, base_items, cand_events, cand_items, p_value, floor, alpha, verdict)
