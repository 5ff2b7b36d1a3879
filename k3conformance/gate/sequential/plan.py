"""What a gated run will cost, sized from the baseline before anything is sent.

Per accuracy suite of the baseline, the plan takes:

- the items the baseline scored (a candidate can be compared on those only) and its accuracy;
- the spread of the per-item difference d = candidate − baseline that an unchanged deployment
  would show. Best: an A/A pair, two complete runs of the baseline's own shape, whose observed
  spread of d is exactly that (a TP8-vs-TP8 pair measures the batch-dependent disagreement of
  healthy runs). Next: a baseline with several samples per item, whose within-item variance
  gives the spread of a candidate that differs by sampling noise only (a lower bound: layouts
  also disagree systematically). Otherwise an assumed discordance of 15% of items, what two
  healthy layouts showed at temperature 0 (GATE_NOTES), said to be an assumption.

From that spread σ and the margin m it plans the group-sequential design (sequential.py):
the maximum size N for 80% power to PASS an unchanged deployment and to FAIL a loss of twice
the margin (the normal approximation Z_k ≈ (δ + m)·√n_k / σ), capped at the items there are
(and at --k3-max-items); then, with that cap, the expected items to a decision for no change
and for a loss of 2m, and the minimum detectable drop at the maximum (the loss the FAIL side
catches 80% of the time). The always-valid monitors (monitors.py) only ever stop earlier,
so the expected sizes are upper bounds when a monitor fires.

For a suite capped by its items whose baseline measures the within-item spread, the plan also
weighs more candidate samples per item (SamplesOutlook) and makes the design a sequential run
follows in rounds of them (`rounds`, sequential.rounds_design): the variance parts it needs
come from the baseline, so the bounds are fixed before the first request.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from scipy import optimize, stats

from k3conformance.gate.settings import GateSettings
from k3conformance.runs.records import STATUS_COMPLETE, SUMMARY_FILE, read_summary
from k3conformance.runs.schema import SchemaError, validate_summary
from k3conformance.runs.spend import spend_by_suite
from k3conformance.runs.stored import StoredRun
from k3conformance.stats.group_sequential import (
    ItemVariance,
    SequentialDesign,
    crossing_probabilities,
    design,
    evaluate_look,
    rounds_design,
    spending_bounds,
)
from k3conformance.stats.monitors import MONITOR_ALPHA
from k3conformance.stats.paired import PASS, POWER, ItemTotals, tango_statistic

ASSUMED_DISCORDANCE = 0.15
DEFAULT_LOOKS = 5
# The chance that a deployment equal to the baseline exits 0: every gated suite must PASS, so
# each is sized for RUN_PASS_POWER ** (1 / suites) (0.95 each for 4 suites, 0.96 for 6).
RUN_PASS_POWER = 0.8
# Samples per item weighed when a suite cannot reach its PASS power on the items there are.
_SAMPLE_COUNTS = (1, 2, 4, 8, 16, 32)
# Items a plan would ask for, beyond which it says "more than any dataset holds".
_PLAN_CEILING = 1_000_000


@dataclass(frozen=True)
class Spread:
    """The per-item standard deviation of d an unchanged deployment shows, and where it came from."""

    sd: float
    source: str
    # The part of sd² that is within-item sampling noise (what more samples per item shrink);
    # None when it is not measured (one sample per item in the baseline).
    noise: float | None = None


@dataclass(frozen=True)
class SamplesOutlook:
    """What more candidate samples per item on the same items would buy at the plan's maximum.

    The variance of an item's d splits into the between-item part (items that one deployment gets
    right more often than the other; a loss concentrated on a few broken items is all between-item)
    and the sampling noise of each side's item mean, the item's per-sample variance over its
    samples. At k candidate samples against the baseline's own: between + noise_b + within/k.
    Only the last term shrinks with k."""

    # Per-sample variance of an item's score, averaged over the baseline's items.
    within: float
    # The variance of d no number of samples removes, and the baseline's own sampling noise.
    between: float
    baseline_noise: float
    # (candidate samples per item, minimum detectable drop at the plan's maximum).
    drops: tuple[tuple[int, float], ...]
    # With unlimited candidate samples: what is left is between-item spread and the baseline's noise.
    limit_drop: float

    @property
    def variance(self) -> ItemVariance:
        return ItemVariance(self.between, self.baseline_noise, self.within)


@dataclass(frozen=True)
class SuitePlan:
    suite: str
    items_available: int
    baseline_accuracy: float
    samples_per_item: int
    spread: Spread
    margin: float
    alpha: float
    # Items a design of these looks needs for 80% power at both design points, before the cap.
    planned_items: int
    design: SequentialDesign
    expected_items_no_change: float
    pass_no_change: float
    expected_items_double_loss: float
    fail_double_loss: float
    min_detectable_drop: float
    fixed_items_no_change: int
    # None when the baseline's within-item spread is unmeasured (one sample per item).
    samples_outlook: SamplesOutlook | None = None
    # The design a sequential run follows instead of `design` when it samples in rounds: the item
    # looks at the run's samples per item, then one look per round at every item (rounds_of).
    rounds: SequentialDesign | None = None
    # The loss the rounds design's FAIL side catches 4 times in 5 (after its last round).
    rounds_min_detectable_drop: float | None = None
    # The PASS power the suite is sized for (the run's 0.8 shared over its gated suites).
    pass_power_target: float = POWER
    # P(PASS) at a true loss of exactly the margin: at most α by construction, printed so a reader sees it.
    pass_at_margin: float = 0.0
    # Whether a candidate equal to the baseline on every item can PASS at the maximum.
    pass_reachable: bool = True
    # Whether any candidate can: one right on every sample of every item (False only where even it cannot).
    pass_possible: bool = True
    reach_note: str = ""
    # What one sample of one item cost the baseline, from its records (None: not measured).
    requests_per_sample: float | None = None
    tokens_per_sample: float | None = None
    # Samples per item (baseline and candidate alike) that reach the PASS power on the maximum's
    # items, where one sample does not; None when no count does or the spread is unmeasured.
    samples_to_pass: int | None = None
    # The budget's cap on the items, when `k3conformance plan --budget` lowered the maximum.
    budget_items: int | None = None
    # σ of d at a loss of twice the margin (spread_at_a_loss), which the FAIL side is sized on.
    fail_sd: float | None = None

    def expected_requests(self, items: float) -> float | None:
        """Requests the candidate sends for `items` items at the baseline's samples per item."""
        if self.requests_per_sample is None:
            return None
        return items * self.samples_per_item * self.requests_per_sample

    def expected_tokens(self, items: float) -> float | None:
        if self.tokens_per_sample is None:
            return None
        return items * self.samples_per_item * self.tokens_per_sample

    @property
    def run_design(self) -> SequentialDesign:
        """What a sequential run of this suite follows: the rounds design when there is one."""
        return self.rounds or self.design

    @property
    def maximum_capped_by(self) -> str | None:
        """The option that set the maximum below the plan's own (the items its power needs, or
        every item the baseline scored where that is fewer); None when the maximum is the plan's.
        A suite that reaches the plan's own maximum undecided ran all the evidence its design
        asked for; one that reaches a cut maximum did not."""
        if self.design.max_items >= min(self.planned_items, self.items_available):
            return None
        return "--budget" if self.design.max_items == self.budget_items else "--k3-max-items"

    @property
    def capped_by_items(self) -> bool:
        """The design wants more items than the baseline holds: the case where samples are weighed."""
        return self.design.max_items == self.items_available < self.planned_items

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "design": self.design.to_dict()}


def within_variances(baseline: Mapping[str, ItemTotals]) -> dict[str, float] | None:
    """Each item's unbiased per-sample variance k/(k − 1)·p(1 − p); None unless every item has 2+ samples."""
    if not baseline or any(totals.samples < 2 for totals in baseline.values()):
        return None
    return {item: t.samples / (t.samples - 1) * t.mean * (1 - t.mean) for item, t in baseline.items()}


def spread_from(
    baseline: Mapping[str, ItemTotals], partner: Mapping[str, ItemTotals] | None, partner_label: str | None
) -> Spread:
    """σ of d for an unchanged deployment: from an A/A pair, else from several samples per item, else assumed."""
    within = within_variances(baseline)
    if partner is not None:
        shared = [item for item in baseline.keys() & partner.keys() if baseline[item].samples and partner[item].samples]
        if len(shared) >= 2:
            differences = [partner[item].mean - baseline[item].mean for item in shared]
            mean = sum(differences) / len(differences)
            variance = sum((d - mean) ** 2 for d in differences) / (len(differences) - 1)
            if variance > 0:
                discordant = sum(1 for d in differences if d) / len(differences)
                # The pair is of one shape: the partner's items have the baseline's per-sample variance.
                noise = (
                    None
                    if within is None
                    else sum(within[i] / baseline[i].samples + within[i] / partner[i].samples for i in shared)
                    / len(shared)
                )
                return Spread(
                    math.sqrt(variance),
                    f"the A/A pair with {partner_label} ({len(shared)} items, {discordant:.0%} with different scores)",
                    noise,
                )
    if within is not None:
        # An A/A difference of two k-sample means has variance 2·p(1 − p)/k.
        variance = sum(2 * within[item] / baseline[item].samples for item in within) / len(within)
        if variance > 0:
            k = round(sum(t.samples for t in baseline.values()) / len(baseline))
            return Spread(
                math.sqrt(variance),
                f"the baseline's within-item spread at {k} samples per item (sampling noise only: a lower bound)",
                variance,
            )
    # Several samples on every item and none of them varied: the sampling noise is measured, and
    # is 0, so all of the assumed spread is between items.
    why = "one sample per item" if within is None else "no item's score varied across its samples"
    return Spread(
        math.sqrt(ASSUMED_DISCORDANCE),
        f"ASSUMED: {ASSUMED_DISCORDANCE:.0%} of items discordant (no A/A pair, {why})",
        None if within is None else 0.0,
    )


def spread_at_a_loss(baseline: Mapping[str, ItemTotals], spread: Spread, loss: float) -> float:
    """σ of d where the candidate has lost `loss` on every item alike: the unchanged spread plus the
    sampling noise its lower scores add, since an item's per-sample variance p(1 − p) grows as p
    falls towards 1/2 (at 91% and 8 samples per item a loss of 6 points takes σ from 0.132 to
    0.150). A FAIL side sized on the unchanged spread FAILed the `numeric-drift` profile on math in
    11 runs of 20 where the plan said 80% (2026-12-06). Never below the unchanged spread: a suite
    near 0% would otherwise be sized on less noise than an unchanged deployment shows. Only where
    the baseline measured its items' sampling noise (two samples or more on every item): with one
    sample an item's score is 0 or 1, no chance of its own, and the spread is a discordance
    (measured or assumed), held as it is."""
    scored = [totals for totals in baseline.values() if totals.samples]
    if not scored or within_variances(baseline) is None:
        return spread.sd

    def variance(share: float) -> float:
        share = min(1.0, max(0.0, share))
        return share * (1 - share)

    added = sum((variance(t.mean - loss) - variance(t.mean)) / t.samples for t in scored) / len(scored)
    return math.sqrt(spread.sd**2 + max(0.0, added))


def samples_outlook(
    chosen: SequentialDesign, baseline: Mapping[str, ItemTotals], spread: Spread, rounds: Sequence[int]
) -> SamplesOutlook | None:
    """The minimum detectable drop at the plan's maximum for each candidate sample count in `rounds`."""
    within = within_variances(baseline)
    if within is None or spread.noise is None:
        return None
    variance = ItemVariance(
        between=max(0.0, spread.sd**2 - spread.noise),
        baseline_noise=sum(within[item] / baseline[item].samples for item in within) / len(within),
        within=sum(within.values()) / len(within),
    )

    def drop(item_variance: float) -> float:
        return _min_detectable_drop(chosen, math.sqrt(item_variance))

    return SamplesOutlook(
        within=variance.within,
        between=variance.between,
        baseline_noise=variance.baseline_noise,
        drops=tuple((k, drop(variance.at(k))) for k in sorted(set(rounds))),
        limit_drop=drop(variance.between + variance.baseline_noise),
    )


def round_counts(first: int, sample_rounds: Sequence[int]) -> tuple[int, ...]:
    """Samples per item at each round: the run's own (round 1), then the planned counts above it."""
    return (first, *sorted({k for k in sample_rounds if k > first}))


def _rounds_of(
    chosen: SequentialDesign, outlook: SamplesOutlook | None, first: int, sample_rounds: Sequence[int]
) -> SequentialDesign | None:
    """The rounds design when more samples per item are measured to help: a baseline with 2+ samples
    per item whose items' scores vary (else more samples change nothing), and counts above `first`."""
    counts = round_counts(first, sample_rounds)
    if outlook is None or outlook.within <= 0 or len(counts) < 2:
        return None
    return rounds_design(chosen, counts, outlook.variance)


def plan_suite(
    suite: str,
    baseline: Mapping[str, ItemTotals],
    spread: Spread,
    *,
    margin: float,
    alpha: float,
    looks: int = DEFAULT_LOOKS,
    max_items: int | None = None,
    sample_rounds: Sequence[int] = (),
    first_samples: int = 1,
    pass_power: float = POWER,
    spend: tuple[float, float] | None = None,
    budget_items: int | None = None,
) -> SuitePlan:
    """The design for one suite. `pass_power`: the PASS power at no change the maximum is sized for
    (the FAIL side's at twice the margin stays 0.8); `spend`: (requests, output tokens) per sample of
    an item, as the baseline spent them; `budget_items`: a cap on the items from `plan --budget`."""
    if not baseline:
        raise ValueError(f"{suite}: the baseline scored no item")
    if margin <= 0:
        raise ValueError(f"{suite}: a sequential plan needs a margin above 0")
    fail_alpha = alpha - MONITOR_ALPHA if alpha > 2 * MONITOR_ALPHA else alpha / 2
    fail_sd = spread_at_a_loss(baseline, spread, 2 * margin)
    planned = _planned_items(spread.sd, margin, alpha, fail_alpha, looks, pass_power, fail_sd)
    available = len(baseline)
    cap = min(planned, available, max_items or available, budget_items or available)
    chosen = design(cap, looks, margin=margin, alpha=alpha, fail_alpha=fail_alpha)
    no_change = _outcome(chosen, spread.sd, 0.0)
    double_loss = _outcome(chosen, fail_sd, -2 * margin)
    z_fixed = _z_sum(alpha)
    outlook = samples_outlook(chosen, baseline, spread, sample_rounds)
    capped = chosen.max_items == available < planned
    rounds = _rounds_of(chosen, outlook, first_samples, sample_rounds) if capped else None
    reachable, possible, reach_note = _reach(chosen, baseline)
    return SuitePlan(
        suite=suite,
        items_available=available,
        baseline_accuracy=sum(t.mean for t in baseline.values() if t.samples) / available,
        samples_per_item=max((t.samples for t in baseline.values()), default=1),
        spread=spread,
        margin=margin,
        alpha=alpha,
        planned_items=planned,
        design=chosen,
        expected_items_no_change=no_change[0],
        pass_no_change=no_change[2],
        expected_items_double_loss=double_loss[0],
        fail_double_loss=double_loss[1],
        fail_sd=fail_sd,
        min_detectable_drop=_min_detectable_drop(chosen, spread.sd),
        fixed_items_no_change=math.ceil((z_fixed * spread.sd / margin) ** 2),
        samples_outlook=outlook,
        rounds=rounds,
        rounds_min_detectable_drop=None if rounds is None else _rounds_drop(rounds, outlook),
        pass_power_target=pass_power,
        pass_at_margin=_outcome(chosen, spread.sd, -margin)[2],
        pass_reachable=reachable,
        pass_possible=possible,
        reach_note=reach_note,
        requests_per_sample=None if spend is None else spend[0],
        tokens_per_sample=None if spend is None else spend[1],
        samples_to_pass=_samples_to_pass(chosen, outlook, pass_power) if no_change[2] < pass_power else None,
        budget_items=budget_items if budget_items is not None and budget_items < min(planned, available) else None,
    )


def _reach(chosen: SequentialDesign, baseline: Mapping[str, ItemTotals]) -> tuple[bool, bool, str]:
    """Whether a PASS is in reach on the maximum's items: (a candidate equal to the baseline on every
    item can PASS, any candidate can, the note saying why not). Equal to the baseline is what an
    unchanged deployment scores on average; where that cannot clear the last look's PASS bound
    (which decides a suite reaching its plan's maximum, gate/sequential/apply.py), an unchanged
    deployment PASSes only by scoring above the baseline by chance, and where even a candidate
    right on every sample cannot (a baseline at 100%), no outcome can."""
    ordered = [baseline[item] for item in sorted(baseline) if baseline[item].samples][: chosen.max_items]
    if len(ordered) < chosen.max_items:
        return (
            False,
            False,
            f"PASS unreachable: the baseline scored {len(ordered)} of the {chosen.max_items} items the design needs",
        )
    binary = all(t.binary for t in ordered)
    unchanged = ordered if binary else _typically_unchanged(ordered)
    equal = evaluate_look(chosen, len(chosen.sizes) - 1, ordered, unchanged)
    if equal.verdict == PASS:
        return True, True, ""
    perfect = [ItemTotals(samples=totals.samples, correct=float(totals.samples)) for totals in ordered]
    possible = evaluate_look(chosen, len(chosen.sizes) - 1, ordered, perfect).verdict == PASS
    needed = _items_to_reach(chosen.margin, chosen.pass_bounds[-1]) if binary else None
    more = f"; one sample per item needs at least {needed} items to make a PASS possible" if needed else ""
    candidate = (
        "a candidate equal to the baseline on every item"
        if binary
        else "an unchanged candidate (each item off by its own sampling noise)"
    )
    return (
        False,
        possible,
        (
            f"PASS unreachable at {chosen.max_items} items for {candidate}: it "
            f"scores {equal.statistic:.2f} against the PASS bound {equal.pass_bound:.2f}{more}"
        ),
    )


def _typically_unchanged(baseline: Sequence[ItemTotals]) -> list[ItemTotals]:
    """What an unchanged deployment typically scores on items of several samples: each item off
    the baseline by the sampling noise of both sides, sqrt(2 p (1 - p) / k), in turn up and down,
    centred. Equal on every item is not typical there: its differences have no spread at all, and
    the paired t takes zero spread on few disagreeing items as no evidence (its floor), so it
    called a PASS unreachable on the agentic suite at 64 samples that the plan sized for 84%
    and that the first A/A seed PASSed."""
    offsets = [
        (1 if index % 2 == 0 else -1) * math.sqrt(2 * totals.mean * (1 - totals.mean) / totals.samples)
        for index, totals in enumerate(baseline)
    ]
    centre = sum(offsets) / len(offsets)
    return [
        ItemTotals(samples=totals.samples, correct=totals.correct + (offset - centre) * totals.samples)
        for totals, offset in zip(baseline, offsets, strict=True)
    ]


def _items_to_reach(margin: float, bound: float) -> int | None:
    """The fewest single-sample items at which zero disagreement clears the last look's PASS bound
    (a z bound: the same at any maximum for the same looks)."""
    for items in range(1, 100_000):
        if tango_statistic(0, 0, items, -margin) >= bound:
            return items
    return None


def _samples_to_pass(chosen: SequentialDesign, outlook: SamplesOutlook | None, target: float) -> int | None:
    """The fewest samples per item, on both sides, at which the maximum's items reach the PASS power."""
    if outlook is None:
        return None
    for samples in _SAMPLE_COUNTS:
        variance = outlook.between + 2 * outlook.within / samples
        if variance <= 0 or _outcome(chosen, math.sqrt(variance), 0.0)[2] >= target:
            return samples
    return None


def _rounds_drop(rounds: SequentialDesign, outlook: SamplesOutlook | None) -> float:
    """At the last round the statistic's spread per item is √v(s_R): the drop formula at that spread."""
    assert outlook is not None
    return _min_detectable_drop(rounds, math.sqrt(outlook.variance.at(rounds.samples[-1])))


def _z_sum(alpha: float) -> float:
    return float(stats.norm.isf(alpha) + stats.norm.ppf(POWER))


def _planned_items(
    sd: float,
    margin: float,
    alpha: float,
    fail_alpha: float,
    looks: int,
    pass_target: float = POWER,
    fail_sd: float | None = None,
) -> int:
    """N for `pass_target` power to PASS at no change (σ of d `sd`) and 80% to FAIL at −2m (σ of d
    `fail_sd`, default `sd`), both a distance m from −m."""
    fractions = [(k + 1) / looks for k in range(looks)]
    fail_bounds, pass_bounds = spending_bounds(fractions, fail_alpha), spending_bounds(fractions, alpha)

    def pass_power(drift: float) -> float:
        return crossing_probabilities(fractions, fail_bounds, pass_bounds, drift).pass_total - pass_target

    def fail_power(drift: float) -> float:
        return crossing_probabilities(fractions, fail_bounds, pass_bounds, -drift).fail_total - POWER

    pass_items = (float(optimize.brentq(pass_power, 0.0, 20.0)) * sd / margin) ** 2
    fail_items = (float(optimize.brentq(fail_power, 0.0, 20.0)) * (fail_sd or sd) / margin) ** 2
    return min(math.ceil(max(pass_items, fail_items)), _PLAN_CEILING)


def _outcome(chosen: SequentialDesign, sd: float, change: float) -> tuple[float, float, float]:
    """(expected items to a decision or the maximum, P(FAIL), P(PASS)) at a true change."""
    drift = (change + chosen.margin) * math.sqrt(chosen.max_items) / sd
    crossing = crossing_probabilities(chosen.fractions, chosen.fail_bounds, chosen.pass_bounds, drift)
    stopped = [f + p for f, p in zip(crossing.fail, crossing.passed, strict=True)]
    expected = sum(size * share for size, share in zip(chosen.sizes, stopped, strict=True))
    expected += chosen.max_items * max(0.0, 1 - sum(stopped))
    return expected, crossing.fail_total, crossing.pass_total


def _min_detectable_drop(chosen: SequentialDesign, sd: float) -> float:
    """The loss (a positive share) the FAIL side catches with 80% power at this design."""

    def fail_power(drift: float) -> float:
        crossing = crossing_probabilities(chosen.fractions, chosen.fail_bounds, chosen.pass_bounds, -drift)
        return crossing.fail_total - POWER

    drift = float(optimize.brentq(fail_power, 0.0, 40.0))
    return chosen.margin + drift * sd / math.sqrt(chosen.max_items)


def plan_lines(plan: SuitePlan) -> list[str]:
    """The plan in words, as `k3conformance plan` and a gated run's header print it."""
    chosen = plan.design
    power = f"{plan.pass_power_target:.0%} PASS power"
    capped = (
        f" (capped: {plan.planned_items} planned for {plan.pass_power_target:.0%} power)"
        if chosen.max_items < plan.planned_items
        else ""
    )
    if plan.budget_items is not None:
        capped += " (cut by the budget)"
    sizes = ", ".join(str(size) for size in chosen.sizes)

    def spent(items: float) -> str:
        requests, tokens = plan.expected_requests(items), plan.expected_tokens(items)
        if requests is None or tokens is None:
            return ""
        return f", about {requests:,.0f} requests and {tokens:,.0f} output tokens"

    lines = [
        f"{plan.suite}: {plan.items_available} items in the baseline at {plan.baseline_accuracy:.1%}, "
        f"{plan.samples_per_item} sample(s) per item; spread of d {plan.spread.sd:.3f} from {plan.spread.source}",
        f"  maximum {chosen.max_items} items{capped}{spent(chosen.max_items)}; looks at {sizes}",
        f"  no change: about {plan.expected_items_no_change:.0f} items to a decision{spent(plan.expected_items_no_change)} "
        f"(PASS {plan.pass_no_change:.0%}; sized for {plan.pass_power_target:.0%})",
        f"  a loss of {plan.margin * 200:.1f} pts (twice the margin): about {plan.expected_items_double_loss:.0f} "
        f"items (FAIL {plan.fail_double_loss:.0%}; sized for {POWER:.0%}"
        + (f", at the spread such a loss makes, {plan.fail_sd:.3f})" if plan.fail_sd else ")"),
        f"  a loss of exactly the margin, {plan.margin * 100:.1f} pts: PASS {plan.pass_at_margin:.1%} (at most α "
        f"{plan.alpha:g})",
        f"  minimum detectable drop at {chosen.max_items} items: {plan.min_detectable_drop * 100:.1f} pts "
        f"(a fixed-size run needs {plan.fixed_items_no_change} items for 80% PASS at no change)",
    ]
    if not plan.pass_reachable:
        if plan.pass_possible:
            lines.append(
                f"  {plan.reach_note}: an unchanged deployment PASSes this suite only where it scores above the "
                "baseline by chance"
            )
        else:
            lines.append(f"  {plan.reach_note}: this suite can only FAIL or be INCONCLUSIVE")
    # What would reach the power is said also where only chance PASSes now: it is the way out.
    if plan.pass_possible and plan.pass_no_change < plan.pass_power_target:
        if plan.samples_outlook is None:
            lines.append(
                f"  {power} on these items: unknown how many samples per item it takes (the baseline's within-item "
                f"spread is unmeasured at one sample per item: store it with --k3-suite-samples {plan.suite}=4)"
            )
        elif plan.samples_to_pass is not None:
            lines.append(
                f"  to reach {power} on these items: {plan.samples_to_pass} samples per item on both sides "
                f"(store the baseline and run the candidate with --k3-suite-samples {plan.suite}={plan.samples_to_pass})"
            )
        else:
            lines.append(f"  {power} is out of reach on {chosen.max_items} items at any number of samples weighed")
    return lines + (samples_lines(plan) if plan.capped_by_items else [])


def samples_lines(plan: SuitePlan) -> list[str]:
    """For a suite capped by its items: what more samples per item on the same items can and cannot resolve."""
    outlook = plan.samples_outlook
    cannot = "a loss concentrated on a few broken items needs more items, not more samples"
    if outlook is None:
        return [
            "  more samples per item: gain unknown (one sample per item: the within-item spread is unmeasured; "
            f"store the baseline with --k3-suite-samples {plan.suite}=4 to plan it); {cannot}"
        ]
    drops = (
        ", ".join(f"{k} → {drop * 100:.1f} pts" for k, drop in outlook.drops) or "not weighed (--k3-sample-rounds none)"
    )
    if plan.spread.source.startswith("ASSUMED"):
        lower = " (ASSUMED, as the spread is)"
    elif outlook.between == 0:
        lower = " (no A/A pair: the between-item spread is taken as 0, a lower bound)"
    else:
        lower = ""
    return [
        f"  minimum detectable drop with more candidate samples per item on the same {plan.design.max_items} items: "
        f"{drops}; never below {outlook.limit_drop * 100:.1f} pts",
        f"  what samples cannot resolve: the between-item variance {outlook.between:.4f} and the baseline's own "
        f"sampling noise {outlook.baseline_noise:.4f} (at {plan.samples_per_item} samples per item){lower}; "
        "a loss concentrated on a few broken items is between-item variance: it needs more items, not more samples",
        *rounds_lines(plan),
    ]


def rounds_lines(plan: SuitePlan) -> list[str]:
    """The looks of a sequential run in rounds, as (items, samples per item), and what its last round can catch."""
    rounds = plan.rounds
    if rounds is None or plan.rounds_min_detectable_drop is None:
        return []
    looks = ", ".join(f"({size}, {samples})" for size, samples in zip(rounds.sizes, rounds.samples, strict=True))
    return [
        f"  a sequential run samples in rounds of {', '.join(map(str, rounds.round_samples))} samples per item "
        f"on the same items: looks (items, samples per item) at {looks}; minimum detectable drop after the last "
        f"round: {plan.rounds_min_detectable_drop * 100:.1f} pts"
    ]


def a_a_partner(baseline: StoredRun, *, started_before: str | None = None) -> StoredRun | None:
    """Another complete run of the baseline's own shape, stored next to it: with the baseline, an A/A pair.

    The newest such run that scored any item of the baseline's suites; None when there is none
    (or the baseline was named by a file outside a shape folder, which has no neighbours).
    `started_before`: only runs started before then (compare's replay looks for the partner the
    run itself found when it started, not one stored since, nor the candidate itself)."""
    if baseline.path is None:
        return None
    run_dir = baseline.path.parent
    for other in sorted((p for p in run_dir.parent.iterdir() if p.is_dir() and p != run_dir), reverse=True):
        summary = read_summary(other)
        if summary is None or summary.get("status") != STATUS_COMPLETE:
            continue
        if started_before is not None and str(summary.get("started_at", "")) >= started_before:
            continue
        try:
            candidate = StoredRun(validate_summary(summary, str(other / SUMMARY_FILE)), other / SUMMARY_FILE)
        except SchemaError:
            continue
        if any(candidate.item_totals(suite).keys() & baseline.item_totals(suite).keys() for suite in _scored(baseline)):
            return candidate
    return None


def suite_pass_power(gated_suites: int) -> float:
    """Each gated suite's PASS power for the run's RUN_PASS_POWER: all of them must PASS."""
    return float(RUN_PASS_POWER ** (1 / max(gated_suites, 1)))


def gated_suite_count(baseline: StoredRun) -> int:
    """How many suites share the run's PASS power: the baseline's accuracy suites. The plan, the
    run's sequential rule and its replay by `compare` all size each suite from this count; the
    run once sized every suite for 80% alone while its header printed the 96% a suite of six
    needs (found by the whole default run's A/A, 2026-12-06)."""
    return len(_scored(baseline))


def plan_items(
    suite: str,
    totals: Mapping[str, ItemTotals],
    options: GateSettings,
    partner: StoredRun | None = None,
    *,
    gated_suites: int,
    spend: tuple[float, float] | None = None,
    budget_items: int | None = None,
) -> SuitePlan:
    """The plan of one suite on these baseline items, its spread from the A/A partner when there is
    one, sized for its share of the run's PASS power among `gated_suites` suites."""
    theirs = partner.item_totals(suite) if partner is not None and suite in partner.scored_suites() else None
    spread = spread_from(totals, theirs, partner.label if partner is not None else None)
    return plan_suite(
        suite,
        totals,
        spread,
        margin=options.margin_of(suite),
        alpha=options.alpha,
        looks=options.looks,
        max_items=options.max_items,
        sample_rounds=options.sample_rounds,
        first_samples=options.samples_of(suite),
        pass_power=suite_pass_power(gated_suites),
        spend=spend,
        budget_items=budget_items,
    )


def spend_per_sample(baseline: StoredRun) -> dict[str, tuple[float, float]]:
    """Per suite, the requests and output tokens one sample of one item cost the baseline (its records)."""
    if baseline.path is None:
        return {}
    spent = spend_by_suite(baseline.path.parent)
    result = {}
    for suite in _scored(baseline):
        samples = sum(t.samples for t in baseline.item_totals(suite).values())
        if suite in spent and samples:
            result[suite] = (spent[suite].requests / samples, spent[suite].output_tokens / samples)
    return result


def plan_baseline(
    baseline: StoredRun, options: GateSettings, partner: StoredRun | None = None, budget: Budget | None = None
) -> list[SuitePlan]:
    """A plan for every accuracy suite (suites with per-item scores) of the baseline; with a budget,
    each suite's maximum is cut in proportion until the whole run's maximum fits it."""
    suites = _scored(baseline)
    spends = spend_per_sample(baseline)

    def plans(caps: Mapping[str, int]) -> list[SuitePlan]:
        return [
            plan_items(
                suite,
                baseline.item_totals(suite),
                options,
                partner,
                gated_suites=gated_suite_count(baseline),
                spend=spends.get(suite),
                budget_items=caps.get(suite),
            )
            for suite in suites
        ]

    planned = plans({})
    if budget is None:
        return planned
    cost = {plan.suite: budget.cost(plan, plan.design.max_items) for plan in planned}
    if None in cost.values():
        raise ValueError(f"a {budget.unit} budget needs the baseline's records to tell what an item costs")
    whole = sum(value or 0.0 for value in cost.values())
    if whole <= budget.amount:
        return planned
    share = budget.amount / whole
    return plans({plan.suite: max(1, math.floor(plan.design.max_items * share)) for plan in planned})


@dataclass(frozen=True)
class Budget:
    """What a gated run may spend at most: requests or output tokens (`k3conformance plan --budget`)."""

    unit: str  # "requests" or "tokens"
    amount: int

    def cost(self, plan: SuitePlan, items: float) -> float | None:
        return plan.expected_requests(items) if self.unit == "requests" else plan.expected_tokens(items)


def plan_report(baseline: StoredRun, options: GateSettings, partner: StoredRun | None = None) -> list[str]:
    """The plan in words for every accuracy suite of the baseline; one line saying why when there is none."""
    try:
        plans = plan_baseline(baseline, options, partner)
    except ValueError as error:
        return [f"no sequential plan: {error}"]
    return report_lines(baseline, options, plans)


def report_lines(
    baseline: StoredRun, options: GateSettings, plans: list[SuitePlan], budget: Budget | None = None
) -> list[str]:
    if not plans:
        return ["no sequential plan: the baseline has no accuracy suite (no per-item scores)"]
    lines = [f"sequential plan against the baseline {baseline.label} (α {options.alpha}, {options.looks} looks)"]
    for plan in plans:
        lines += plan_lines(plan)
    return lines + run_lines(plans, budget)


def run_lines(plans: Sequence[SuitePlan], budget: Budget | None = None) -> list[str]:
    """What the whole run can reach: every gated suite must PASS for exit 0."""
    exit_zero = math.prod(plan.pass_no_change for plan in plans)
    unreachable = [plan.suite for plan in plans if not plan.pass_possible]
    by_chance = [plan.suite for plan in plans if plan.pass_possible and not plan.pass_reachable]
    lines = [
        f"the run: a deployment equal to the baseline exits 0 with about {exit_zero:.0%} (every one of "
        f"{len(plans)} gated suites must PASS; each is sized for {suite_pass_power(len(plans)):.0%}, "
        f"the run for {RUN_PASS_POWER:.0%})"
    ]
    if unreachable:
        lines.append(f"  PASS cannot be reached on {', '.join(unreachable)}: this run can exit 0 only once they can")
    if by_chance:
        lines.append(
            f"  a deployment equal to the baseline cannot PASS {', '.join(by_chance)}: an unchanged one exits 0 only "
            "where it scores above the baseline there by chance"
        )
    requests = [plan.expected_requests(plan.design.max_items) for plan in plans]
    tokens = [plan.expected_tokens(plan.design.max_items) for plan in plans]
    if None not in requests and None not in tokens:
        lines.append(
            f"  at most about {sum(r or 0 for r in requests):,.0f} requests and {sum(t or 0 for t in tokens):,.0f} "
            "output tokens (every suite to its maximum)"
        )
    if budget is not None:
        capped = [plan for plan in plans if plan.budget_items is not None]
        if capped:
            caps = ",".join(f"{plan.suite}={plan.design.max_items}" for plan in capped)
            lines.append(
                f"  the budget of {budget.amount:,} {budget.unit} cuts the maxima ({caps}); --k3-max-items "
                f"{min(plan.design.max_items for plan in capped)} keeps a run within it (it caps every suite alike)"
            )
        else:
            lines.append(f"  the budget of {budget.amount:,} {budget.unit} holds every suite's maximum")
    return lines


def _scored(run: StoredRun) -> list[str]:
    return sorted(run.scored_suites())
