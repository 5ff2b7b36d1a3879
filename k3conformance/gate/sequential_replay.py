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
from dataclasses import dataclass
from typing import Any

from k3conformance.gate.sequential import SequentialDesign
from k3conformance.gate.sequential_run import suite_path, suite_rule
from k3conformance.gate.sequential_suite import SequentialSuite
from k3conformance.gate.settings import GateSettings
from k3conformance.gate.statistics import ItemTotals
from k3conformance.runs.stored import StoredRun


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
        rule = suite_rule(design, baseline, suite, order, settings)
        fed, blocked_by = _feed(rule, suite, order[: design.max_items], baseline, candidate)
        paths[suite] = suite_path(
            rule,
            order=order,
            seed=block.get("order_seed"),
            samples_used=sum(candidate.item_totals(suite)[item].samples for item in order[:fed]),
            blocked_by=blocked_by,
            cancelled_items=list(block.get("cancelled_items") or []),
            requests_saved=int(block.get("requests_saved") or 0),
            output_tokens_saved=int(block.get("output_tokens_saved") or 0),
        )
    return Replayed(paths, notes)


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
    )
    if not design.sizes or design.sizes[-1] != design.max_items or len(design.fail_bounds) != len(design.sizes):
        raise ValueError(f"looks {design.sizes} do not fit a maximum of {design.max_items}")
    return design


def _feed(
    rule: SequentialSuite, suite: str, order: list[str], baseline: StoredRun, candidate: StoredRun
) -> tuple[int, str | None]:
    """Feed the order until the rule decides or an item is missing on either side: (items fed, the blocking item)."""
    before: Mapping[str, ItemTotals] = baseline.item_totals(suite)
    after: Mapping[str, ItemTotals] = candidate.item_totals(suite)
    scores = candidate.suites[suite]["scores"] if suite in candidate.suites else {}
    fed = 0
    for item in order:
        if rule.stop is not None:
            break
        if not (item in before and before[item].samples and item in after and after[item].samples):
            return fed, item
        rule.add(
            before[item], after[item], looping=scores[item]["looping"] > 0, truncated=scores[item]["truncated"] > 0
        )
        fed += 1
    return fed, None
