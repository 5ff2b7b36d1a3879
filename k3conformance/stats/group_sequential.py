"""Group-sequential gating of a suite's accuracy: decide at a few looks instead of at the end.

A fixed-size comparison spends every item even when the first tenth of them already shows
a 25-point loss. A group-sequential design looks at K pre-planned sizes n_1 < … < n_K =
N_max (items in a pre-committed order) and may stop at any look; the price of looking K
times is paid with bounds that are wide early and near the fixed-size ones at the end.

The statistic (one for both sides), for paired binary items with b items only the baseline
got right and c only the candidate got right, is Tango's score statistic against a change of
exactly −margin (Tango 1998, "Equivalence test and confidence interval for the difference in
proportions for the paired-sample design"):

    Z = (c − b + n·m) / sqrt(n · (2·p̂ − m − m²)),

where p̂ is the maximum-likelihood share of baseline-only items under the constraint that the
change is −m: the fixed-size gate's statistic (statistics.tango_statistic), with its quarter
of an item of continuity correction. Without it, with few discordant items the statistic's
lattice puts more than the spent alpha beyond the FAIL bounds: at 3% discordant items and
a 600-item cap, an exact computation gives 5.5% FAIL at the margin against the 4.5% spent
(6.4% was simulated); with it, 4.9% (tests/unit/gate/sequential/test_sequential.py computes it). Its variance is estimated under the null, not assumed: the test needs no
discordance to be known, which is what makes it valid when two layouts disagree on 3% of
items as well as on 25% (a Wald SPRT on the discordant pairs that assumes a discordance is
not: tests/unit/stats/test_sequential_calibration.py shows it failing healthy deployments). Items with
several samples use the paired t statistic of the item means against −m, with each bound
moved to the t quantile of the same one-sided level.

Bounds: O'Brien–Fleming-type alpha spending (Lan and DeMets 1983), α(t) = 2 − 2Φ(z_{1−α/2}/√t)
at the information fraction t = n_k / N_max, one-sided on each side and non-binding:

- FAIL at look k when Z ≤ −f_k (a loss beyond the margin is shown), spending `fail_alpha`;
- PASS at look k when Z ≥ p_k (a loss beyond the margin is ruled out), spending `alpha`;
- at the last look neither: INCONCLUSIVE, as in the fixed-size gate. Nothing is forced.

Each side's bounds are computed as if the other side never stopped (non-binding), so each
side's error is at most its alpha whatever the other does. The crossing probabilities come
from the canonical joint distribution of (Z_1 … Z_K) (Brownian motion at the information
times), integrated numerically on a grid (Jennison and Turnbull, "Group Sequential Methods",
ch. 19): deterministic, no Monte Carlo. Looks taken at other sizes than planned keep the
error rate, because the spending function is evaluated at the sizes actually reached.

Rounds (rounds_design): a suite with few items may take, after its item looks, one look per
round of more samples on every item. The information of a look is then 1/Var of the mean
difference at its items and samples, planned from the baseline's variance parts; nested samples
give the same independent-increments structure, so the same spending applies at those fractions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import optimize, stats

from k3conformance.stats.paired import (
    FAIL,
    INCONCLUSIVE,
    PASS,
    ItemTotals,
    Verdict,
    planning_error,
    skew_corrected,
    skew_term,
    tango_statistic,
    too_few_disagreeing,
)

# Grid points per look of the numerical integration; error of the crossing probabilities
# under 1e-5 against the closed form at one look (tests/unit/gate/sequential/test_sequential.py).
_GRID_POINTS = 401
# Standard deviations of the Brownian motion the grid covers below/above its mean.
_GRID_SPAN = 8.0
# A bound for a look that spends (almost) nothing: never crossed in practice.
_NEVER = 12.0


def obrien_fleming_spent(fraction: float, alpha: float) -> float:
    """Lan–DeMets O'Brien–Fleming-type spending: the share of alpha spent by information fraction t."""
    if fraction <= 0:
        return 0.0
    if fraction >= 1:
        return alpha
    return float(2 * stats.norm.sf(stats.norm.isf(alpha / 2) / math.sqrt(fraction)))


def _normal_grid(low: float, high: float) -> tuple[np.ndarray, np.ndarray]:
    """Points and trapezoid weights covering [low, high]."""
    points = np.linspace(low, high, _GRID_POINTS)
    weights = np.full(_GRID_POINTS, (high - low) / (_GRID_POINTS - 1))
    weights[0] /= 2
    weights[-1] /= 2
    return points, weights


def spending_bounds(fractions: Sequence[float], alpha: float) -> list[float]:
    """One-sided upper bounds on the Z scale for looks at these information fractions (increasing,
    the last 1): under the null, P(Z_k ≥ b_k first at look k) = α(t_k) − α(t_{k−1})."""
    _check_fractions(fractions)
    bounds: list[float] = []
    # Density of the Brownian motion S_t (Z_t = S_t/√t) on the continuation region, times weights.
    points = np.zeros(1)
    mass = np.ones(1)
    previous = 0.0
    spent = 0.0
    for fraction in fractions:
        target = obrien_fleming_spent(fraction, alpha) - spent
        step = fraction - previous
        bound = _solve_bound(points, mass, fraction, step, target)
        bounds.append(bound)
        spent += _exit_probability(points, mass, bound, fraction, step)
        points, mass = _advance(points, mass, step, 0.0, -_GRID_SPAN * math.sqrt(fraction), bound * math.sqrt(fraction))
        previous = fraction
    return bounds


def _solve_bound(points: np.ndarray, mass: np.ndarray, fraction: float, step: float, target: float) -> float:
    """The bound at this look whose exit probability (not stopped before) is `target`."""

    def excess(bound: float) -> float:
        return _exit_probability(points, mass, bound, fraction, step) - target

    if target <= 1e-12 or excess(_NEVER) >= 0:
        return _NEVER
    return float(optimize.brentq(excess, -_NEVER, _NEVER, xtol=1e-9))


def _exit_probability(points: np.ndarray, mass: np.ndarray, bound: float, fraction: float, step: float) -> float:
    """P(Z ≥ bound at the look at `fraction`, not stopped before), from the weighted density one step before."""
    return float(np.sum(mass * stats.norm.sf((bound * math.sqrt(fraction) - points) / math.sqrt(step))))


def _advance(
    points: np.ndarray, mass: np.ndarray, step: float, drift: float, low: float, high: float
) -> tuple[np.ndarray, np.ndarray]:
    """The (weighted) density on [low, high] after a Brownian step of variance `step` and mean drift·step."""
    scale = math.sqrt(step)
    grid, weights = _normal_grid(low, high)
    density = stats.norm.pdf((grid[:, None] - points[None, :] - drift * step) / scale) / scale
    return grid, weights * (density @ mass)


@dataclass(frozen=True)
class Crossing:
    """Probabilities, per look, of stopping there with FAIL or with PASS."""

    fail: list[float]
    passed: list[float]

    @property
    def fail_total(self) -> float:
        return sum(self.fail)

    @property
    def pass_total(self) -> float:
        return sum(self.passed)


def crossing_probabilities(
    fractions: Sequence[float], fail_bounds: Sequence[float], pass_bounds: Sequence[float], drift: float
) -> Crossing:
    """Where the two-sided procedure stops when E[Z_k] = drift·√t_k: FAIL at Z_k ≤ −f_k, PASS at Z_k ≥ p_k."""
    _check_fractions(fractions)
    points = np.zeros(1)
    mass = np.ones(1)
    previous = 0.0
    fails: list[float] = []
    passes: list[float] = []
    for fraction, fail_bound, pass_bound in zip(fractions, fail_bounds, pass_bounds, strict=True):
        step = fraction - previous
        scale = math.sqrt(step)
        root = math.sqrt(fraction)
        means = points + drift * step
        fails.append(float(np.sum(mass * stats.norm.cdf((-fail_bound * root - means) / scale))))
        passes.append(float(np.sum(mass * stats.norm.sf((pass_bound * root - means) / scale))))
        points, mass = _advance(points, mass, step, drift, -fail_bound * root, pass_bound * root)
        previous = fraction
    return Crossing(fails, passes)


def _check_fractions(fractions: Sequence[float]) -> None:
    if not fractions or any(b <= a for a, b in zip([0.0, *fractions], fractions, strict=False)):
        raise ValueError(f"information fractions must increase from above 0: {list(fractions)}")
    if abs(fractions[-1] - 1) > 1e-9:
        raise ValueError(f"the last look must be at the maximum size (fraction 1): {list(fractions)}")


def look_sizes(max_items: int, looks: int) -> list[int]:
    """Equally spaced looks up to the maximum; fewer looks when there are fewer items than looks."""
    if max_items < 1 or looks < 1:
        raise ValueError(f"a design needs items and looks: {max_items} items, {looks} looks")
    sizes = sorted({max(1, round(max_items * (k + 1) / looks)) for k in range(looks)})
    return sizes


@dataclass(frozen=True)
class SequentialDesign:
    """A suite's looks and bounds, fixed before the first request."""

    max_items: int
    sizes: tuple[int, ...]
    margin: float
    # PASS side spends alpha; FAIL side spends fail_alpha (alpha less what the always-valid
    # accuracy monitor may spend, so that a suite's FAIL error stays within alpha).
    alpha: float
    fail_alpha: float
    fail_bounds: tuple[float, ...]
    pass_bounds: tuple[float, ...]
    # A design with rounds of samples per item (rounds_design): the candidate samples per item at
    # each look and the information fractions planned from the baseline. Empty in an item-only
    # design (every look at the run's samples, fractions n/N), and in designs stored before rounds.
    samples: tuple[int, ...] = ()
    information: tuple[float, ...] = ()

    @property
    def fractions(self) -> tuple[float, ...]:
        if self.information:
            return self.information
        return tuple(size / self.max_items for size in self.sizes)

    @property
    def has_rounds(self) -> bool:
        return bool(self.samples) and self.samples[-1] > self.samples[0]

    @property
    def round_samples(self) -> tuple[int, ...]:
        """Samples per item after each round, round 1 first; () for an item-only design."""
        return tuple(sorted(set(self.samples))) if self.has_rounds else ()

    def round_looks(self, looks: int) -> int:
        """How many of the first `looks` looks were rounds' (every item at more samples than round 1)."""
        return sum(1 for samples in self.samples[:looks] if samples > self.samples[0])

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if not self.samples:
            # An item-only design is stored exactly as before rounds existed.
            del data["samples"], data["information"]
        return data


def design(
    max_items: int, looks: int, *, margin: float, alpha: float, fail_alpha: float | None = None
) -> SequentialDesign:
    sizes = look_sizes(max_items, looks)
    fractions = [size / max_items for size in sizes]
    fail_alpha = alpha if fail_alpha is None else fail_alpha
    return SequentialDesign(
        max_items=max_items,
        sizes=tuple(sizes),
        margin=margin,
        alpha=alpha,
        fail_alpha=fail_alpha,
        fail_bounds=tuple(spending_bounds(fractions, fail_alpha)),
        pass_bounds=tuple(spending_bounds(fractions, alpha)),
    )


@dataclass(frozen=True)
class ItemVariance:
    """The variance of one item's d = candidate mean − baseline mean, in parts (plan.SamplesOutlook):
    `between` (no sample count removes it), the baseline's own sampling noise, and the per-sample
    within-item variance, of which a candidate mean over s samples carries within/s."""

    between: float
    baseline_noise: float
    within: float

    def at(self, samples: int) -> float:
        return self.between + self.baseline_noise + self.within / samples


def round_fractions(sizes: Sequence[int], max_items: int, rounds: Sequence[int], variance: ItemVariance) -> list[float]:
    """Information fractions of item looks at rounds[0] samples per item, then one look per later round at
    every item. D(n, s), the mean of d over the first n items at s samples, has variance v(s)/n; with
    samples nested (a round reuses the earlier rounds' samples) Cov(D(n_j, s_j), D(n_k, s_k)) = Var D(n_k, s_k)
    for n_j ≤ n_k, s_j ≤ s_k: independent increments at information 1/Var (tests/unit/gate/sequential/test_sequential_rounds.py
    checks it by simulation), so spending_bounds applies at t = I_look / I_last."""
    last = variance.at(rounds[-1])
    item_looks = [size / max_items * last / variance.at(rounds[0]) for size in sizes]
    round_looks = [last / variance.at(samples) for samples in rounds[1:]]
    return [*item_looks, *round_looks]


def rounds_design(base: SequentialDesign, rounds: Sequence[int], variance: ItemVariance) -> SequentialDesign:
    """`base`'s item looks at rounds[0] samples per item, then a look at every item for each later round
    (rounds increasing), with bounds spent at the information fractions planned from the baseline."""
    fractions = round_fractions(base.sizes, base.max_items, rounds, variance)
    later = len(rounds) - 1
    return SequentialDesign(
        max_items=base.max_items,
        sizes=(*base.sizes, *([base.max_items] * later)),
        margin=base.margin,
        alpha=base.alpha,
        fail_alpha=base.fail_alpha,
        fail_bounds=tuple(spending_bounds(fractions, base.fail_alpha)),
        pass_bounds=tuple(spending_bounds(fractions, base.alpha)),
        samples=(*([rounds[0]] * len(base.sizes)), *rounds[1:]),
        information=tuple(fractions),
    )


def paired_t_statistic(differences: Sequence[float], margin: float) -> tuple[float, int]:
    """(t statistic of H0 "mean difference = −margin", degrees of freedom) on item-mean differences,
    with Johnson's skewness correction where it makes a PASS harder."""
    count = len(differences)
    if count < 2:
        return 0.0, 1
    mean = sum(differences) / count
    variance = sum((d - mean) ** 2 for d in differences) / (count - 1)
    standard_error = math.sqrt(variance / count)
    if too_few_disagreeing(differences) or standard_error == 0:
        # Never under the error with Agresti and Min's pseudo-observations: a zero (or tiny) variance
        # on few items is no evidence of a small loss (the plain statistic was ±12 there, and 8 equal
        # items passed at a true loss of the margin).
        standard_error = max(standard_error, planning_error(differences))
    # Johnson's skewness correction on the PASS side (paired.skew_term).
    return skew_corrected((mean + margin) / standard_error, skew_term(differences)), count - 1


@dataclass(frozen=True)
class Look:
    """One look: the statistic against its bounds, and what it decided."""

    look: int
    items: int
    statistic: float
    # Bounds on the statistic's own scale (t quantiles for item means).
    fail_bound: float
    pass_bound: float
    method: str
    verdict: Verdict

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def evaluate_look(
    plan: SequentialDesign, look: int, baseline: Sequence[ItemTotals], candidate: Sequence[ItemTotals]
) -> Look:
    """Decide at look `look` (0-based) on the first sizes[look] items of the committed order, paired by position.

    The caller passes the items in the committed order; only the first sizes[look] are used."""
    size = plan.sizes[look]
    if len(baseline) < size or len(candidate) < size:
        raise ValueError(f"look {look + 1} needs {size} items, got {min(len(baseline), len(candidate))}")
    base, cand = baseline[:size], candidate[:size]
    fail_z, pass_z = plan.fail_bounds[look], plan.pass_bounds[look]
    if all(b.binary and c.binary for b, c in zip(base, cand, strict=True)):
        b_only = sum(1 for b, c in zip(base, cand, strict=True) if b.correct > c.correct)
        c_only = sum(1 for b, c in zip(base, cand, strict=True) if c.correct > b.correct)
        statistic = tango_statistic(b_only, c_only, size, -plan.margin)
        fail_bound, pass_bound, method = -fail_z, pass_z, "Tango score (one sample per item)"
    else:
        statistic, freedom = paired_t_statistic([c.mean - b.mean for b, c in zip(base, cand, strict=True)], plan.margin)
        fail_bound = float(stats.t.ppf(stats.norm.cdf(-fail_z), freedom))
        pass_bound = float(stats.t.isf(stats.norm.sf(pass_z), freedom))
        method = "paired t on item means"
    if statistic <= fail_bound:
        verdict: Verdict = FAIL
    elif statistic >= pass_bound:
        verdict = PASS
    else:
        verdict = INCONCLUSIVE
    # INCONCLUSIVE before the last look means: go on to the next one.
    return Look(look + 1, size, statistic, fail_bound, pass_bound, method, verdict)
