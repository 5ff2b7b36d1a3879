"""Re-gating a stored sequential run (`k3conformance compare`): the rule replayed, not its verdict trusted.

A suite the sequential gate stopped early holds only the items of its committed order up to
the stop, so the fixed-size comparison would call the rest missing (INCOMPLETE). The stored
decision was made against one baseline at one margin, α and set of floors; `compare` may be
asked for another baseline or other settings, and the summary may have been edited. So the
rule is run again: the stored design and committed order, fed the candidate's stored item
scores against the baseline being compared, with the monitors at the compare's floors. Its
decision is the one this comparison can stand behind.

Fail-closed: a suite whose stored design was made at another margin or α than the compare's
gets no sequential decision (its bounds were spent for that margin and α), and a stored block
that does not parse gets none either; such suites are judged fixed-size on the items they ran,
which for a suite stopped early means INCOMPLETE. Each is said in a note.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from k3conformance.gate.sequential.plan import SuitePlan, a_a_partner, gated_suite_count, plan_items
from k3conformance.gate.sequential.rule import SequentialSuite
from k3conformance.gate.sequential.state import suite_path, suite_rule
from k3conformance.gate.settings import GateSettings
from k3conformance.runs.stored import StoredRun
from k3conformance.stats.group_sequential import SequentialDesign
from k3conformance.stats.paired import ItemTotals


@dataclass(frozen=True)
class Replayed:
    # Per suite, a sequential block as `SequentialRun.to_summary` writes it, from the replay.
    paths: dict[str, dict[str, Any]]
    # Why a suite of the stored block was left to the fixed-size gate.
    notes: list[str]


def replay_sequential(
    stored: Mapping[str, Any], baseline: StoredRun, candidate: StoredRun, settings: GateSettings
) -> Replayed:
    """The stored block's suites, each replayed or left to the fixed-size gate with a note."""
    paths: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    if not isinstance(stored, Mapping):
        return Replayed(paths, ["the stored sequential block is not a table of suites; every suite judged fixed-size"])
    for suite, block in sorted(stored.items()):
        try:
            design, order = _design_of(block), [str(item) for item in block["order"]]
        except (KeyError, TypeError, ValueError) as error:
            notes.append(f"{suite}: the stored sequential block does not parse ({error!r}); judged fixed-size")
            continue
        margin, alpha = settings.margin_of(suite), settings.alpha
        if not (math.isclose(design.margin, margin) and math.isclose(design.alpha, alpha)):
            notes.append(
                f"{suite}: the run's sequential design was made for margin {design.margin * 100:g} pts at α "
                f"{design.alpha:g}, not the {margin * 100:g} pts at α {alpha:g} asked for; judged fixed-size"
            )
            continue
        plan = _recomputed_plan(design, suite, order, baseline, candidate, settings)
        if isinstance(plan, str):
            notes.append(f"{suite}: {plan}; judged fixed-size")
            continue
        rule = suite_rule(design, baseline, suite, order, settings)
        try:
            rounds = _round_totals(block, design)
        except (KeyError, TypeError, ValueError, IndexError) as error:
            notes.append(f"{suite}: the stored scores per round do not parse ({error!r}); judged fixed-size")
            continue
        fed, blocked_by = _feed(rule, suite, order[: design.max_items], baseline, candidate, rounds)
        paths[suite] = suite_path(
            rule,
            order=order,
            seed=block.get("order_seed"),
            samples_used=_samples_used(rule, suite, order[:fed], candidate, rounds),
            round_totals=block.get("round_totals") or {},
            blocked_by=blocked_by,
            cancelled_items=list(block.get("cancelled_items") or []),
            requests_saved=int(block.get("requests_saved") or 0),
            output_tokens_saved=int(block.get("output_tokens_saved") or 0),
            maximum_capped_by=plan.maximum_capped_by,
            left_unjudged=str(block["left_unjudged"]) if block.get("left_unjudged") else None,
        )
    return Replayed(paths, notes)


# The plan options a run records in its settings, as GateSettings names them.
_PLAN_SETTINGS = ("looks", "max_items", "sample_rounds", "samples")


def _recomputed_plan(
    stored: SequentialDesign,
    suite: str,
    order: list[str],
    baseline: StoredRun,
    candidate: StoredRun,
    settings: GateSettings,
) -> SuitePlan | str:
    """The plan made from the baseline and the run's recorded options, or why the stored design is
    not that plan's.

    The design is recomputed, never read from the candidate: an edited summary with every PASS
    bound at −12 was PASS, exit 0 (issue 21, reproduction 3). So is what cut its maximum."""
    recorded = candidate.summary.get("settings") or {}
    if not all(name in recorded for name in _PLAN_SETTINGS):
        return "the run did not record its plan options, so its design cannot be recomputed from the baseline"
    try:
        options = replace(
            settings,
            looks=int(recorded["looks"]),
            max_items=None if recorded["max_items"] is None else int(recorded["max_items"]),
            sample_rounds=tuple(int(count) for count in recorded["sample_rounds"]),
            samples=int(recorded["samples"]),
            # Recorded since --k3-suite-samples exists; a run before it had none.
            suite_samples=tuple((str(name), int(count)) for name, count in recorded.get("suite_samples") or ()),
        )
    except (TypeError, ValueError) as error:
        return f"the run's recorded plan options do not parse ({error!r})"
    totals = baseline.item_totals(suite)
    if set(order) != {item for item, entry in totals.items() if entry.samples} or len(order) != len(set(order)):
        return "the stored order is not the baseline's item set"
    partner = a_a_partner(baseline, started_before=candidate.summary.get("started_at"))
    try:
        plan = _planned(
            suite, tuple((item, totals[item]) for item in order), options, partner, gated_suite_count(baseline)
        )
    except ValueError as error:
        return f"no plan can be made from the baseline ({error})"
    if not _same_design(stored, plan.run_design):
        return "the stored sequential design is not the one the plan makes from the baseline and the run's options"
    return plan


# Plans made in this process, by everything they are planned from (the partner by its file).
_PLANNED: dict[tuple[Any, ...], SuitePlan] = {}


def _planned(
    suite: str,
    totals: tuple[tuple[str, ItemTotals], ...],
    options: GateSettings,
    partner: StoredRun | None,
    gated_suites: int,
) -> SuitePlan:
    """The plan (seconds of numerical work for a suite sampled in rounds), kept for the same
    inputs: re-gating one run under several options replans only what changed."""
    key = (suite, totals, options, None if partner is None else (str(partner.path), partner.label), gated_suites)
    if key not in _PLANNED:
        _PLANNED[key] = plan_items(suite, dict(totals), options, partner, gated_suites=gated_suites)
    return _PLANNED[key]


def _same_design(one: SequentialDesign, other: SequentialDesign) -> bool:
    def close(first: tuple[float, ...], second: tuple[float, ...]) -> bool:
        return len(first) == len(second) and all(
            math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) for a, b in zip(first, second, strict=True)
        )

    return (
        one.max_items == other.max_items
        and one.sizes == other.sizes
        and one.samples == other.samples
        and close((one.margin, one.alpha, one.fail_alpha), (other.margin, other.alpha, other.fail_alpha))
        and close(one.fail_bounds, other.fail_bounds)
        and close(one.pass_bounds, other.pass_bounds)
        and close(one.information, other.information)
    )


def _design_of(block: Mapping[str, Any]) -> SequentialDesign:
    raw = block["design"]
    design = SequentialDesign(
        max_items=int(raw["max_items"]),
        sizes=tuple(int(size) for size in raw["sizes"]),
        margin=float(raw["margin"]),
        alpha=float(raw["alpha"]),
        fail_alpha=float(raw["fail_alpha"]),
        fail_bounds=tuple(float(bound) for bound in raw["fail_bounds"]),
        pass_bounds=tuple(float(bound) for bound in raw["pass_bounds"]),
        # Designs stored before rounds existed have neither: the item-only design.
        samples=tuple(int(count) for count in raw.get("samples") or ()),
        information=tuple(float(fraction) for fraction in raw.get("information") or ()),
    )
    if not design.sizes or design.sizes[-1] != design.max_items or len(design.fail_bounds) != len(design.sizes):
        raise ValueError(f"looks {design.sizes} do not fit a maximum of {design.max_items}")
    if design.samples and not (len(design.samples) == len(design.information) == len(design.sizes)):
        raise ValueError(f"samples per look {design.samples} do not fit looks at {design.sizes}")
    return design


# Per item, its (totals, looped, truncated) after each round, from the stored block.
RoundTable = dict[str, list[tuple[ItemTotals, bool, bool]]]


def _round_totals(block: Mapping[str, Any], design: SequentialDesign) -> RoundTable | None:
    """The candidate's score per item after each round, for a design with rounds; None for one without."""
    if not design.has_rounds:
        return None
    return {
        str(item): [(ItemTotals(int(entry[0]), float(entry[1])), bool(entry[2]), bool(entry[3])) for entry in rounds]
        for item, rounds in block["round_totals"].items()
    }


def _samples_used(
    rule: SequentialSuite, suite: str, fed: list[str], candidate: StoredRun, rounds: RoundTable | None
) -> int:
    if rounds is None:
        return sum(candidate.item_totals(suite)[item].samples for item in fed)
    looked = rule.design.round_looks(len(rule.looks))
    return sum(rounds[item][looked][0].samples for item in fed)


def _feed(
    rule: SequentialSuite,
    suite: str,
    order: list[str],
    baseline: StoredRun,
    candidate: StoredRun,
    rounds: RoundTable | None,
) -> tuple[int, str | None]:
    """Feed the order until the rule decides or an item is missing on either side, then each round's
    look while every item has that round: (items fed, the blocking item)."""
    before: Mapping[str, ItemTotals] = baseline.item_totals(suite)
    after: Mapping[str, ItemTotals] = candidate.item_totals(suite)
    scores = candidate.suites[suite]["scores"] if suite in candidate.suites else {}
    fed = 0
    for item in order:
        if rule.stop is not None:
            break
        if not (item in before and before[item].samples and item in after and after[item].samples):
            return fed, item
        if rounds is None:
            totals, looping, truncated = after[item], scores[item]["looping"] > 0, scores[item]["truncated"] > 0
        elif item in rounds:
            # Round 1's own score: the summary's totals hold every round's samples.
            totals, looping, truncated = rounds[item][0]
        else:
            return fed, item
        rule.add(before[item], totals, looping=looping, truncated=truncated)
        fed += 1
    round_ = 1
    while rounds is not None and rule.awaits_round:
        if not all(len(rounds.get(item, [])) > round_ for item in order):
            # A round not finished (the run was interrupted): no decision, as in the run.
            return fed, None
        rule.add_round([rounds[item][round_][0] for item in order])
        round_ += 1
    return fed, None
