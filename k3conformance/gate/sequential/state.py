"""The sequential gate inside a run: a committed item order per suite, items fed in that order,
and the suite stopped (its remaining requests cancelled) when the rule decides.

For every accuracy suite of the baseline, the order is a permutation of the suite's items
seeded by the run id and the suite name (recorded in the summary, so the order can be
replayed), fixed before the first request. The suite's tests are put in that order, so the
runner's prefetch window sends requests in that order, concurrently, ahead of the test that is
running. An item is fed to the rule only once it and every item before it in the order are
scored: a look at n items is a look at the first n items of the order, never at the first n
to finish (looping outputs are the longest; completion order would hide them). Items beyond
the design's maximum are deselected and never requested.

A suite sampled in rounds (plan.SuitePlan.rounds: few items, a baseline with several samples
per item) has a test per item and later round, each sending only that round's new samples; a
round's look waits for that round of every item of the order (`_feed_rounds`), and its requests
are sent ahead only once the round is the next look's.

An item the candidate could not score (an infrastructure error) blocks the order: the rule
sees nothing past it, the suite runs to its end, and the fixed-size gate (with its INCOMPLETE
for failed requests) decides. Missing evidence never turns into an early PASS.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from k3conformance.gate.sequential.chart import look_samples
from k3conformance.gate.sequential.plan import SuitePlan, gated_suite_count, plan_items
from k3conformance.gate.sequential.rule import BY_MAXIMUM, SequentialSuite, Stop
from k3conformance.gate.settings import GateSettings
from k3conformance.gate.verdict import RATE_EVENTS
from k3conformance.probes.probe import Probe
from k3conformance.runs.spend import Spend
from k3conformance.runs.stored import StoredRun
from k3conformance.stats.group_sequential import SequentialDesign
from k3conformance.stats.paired import FAIL, ItemTotals


def committed_order(kinds: Mapping[str, str], run_id: str, suite: str) -> tuple[list[str], int]:
    """(the items in their committed order, the seed that produced it); `kinds` maps each item
    to its kind (a task kind, the dataset it comes from).

    A stratified random order: each kind's items are shuffled, and the next place goes to the
    kind furthest behind its share (ties broken at random), so every prefix (every look, every
    monitor check) holds each kind within one item of its share. A plain shuffle can put the
    few long-output tasks, where a broken kernel loops, late in a 60-task suite, and the rule
    then waits for them; stratifying by a property known before any answer is seen keeps the
    order independent of the outcomes, which is all a look needs."""
    seed = int.from_bytes(hashlib.sha256(f"{run_id}:{suite}".encode()).digest()[:8], "big")
    rng = random.Random(seed)
    queues: dict[str, list[str]] = {}
    for item in sorted(kinds):
        queues.setdefault(kinds[item], []).append(item)
    for members in queues.values():
        rng.shuffle(members)
    sizes = {kind: len(members) for kind, members in queues.items()}
    tiebreak = {kind: rng.random() for kind in sorted(queues)}
    total = len(kinds)
    order: list[str] = []
    taken = dict.fromkeys(queues, 0)
    while len(order) < total:
        place = len(order) + 1
        kind = max(
            (kind for kind in queues if taken[kind] < sizes[kind]),
            key=lambda kind: (place * sizes[kind] / total - taken[kind], tiebreak[kind]),
        )
        order.append(queues[kind][taken[kind]])
        taken[kind] += 1
    return order, seed


# The kind of a baseline item the run did not collect, for the committed order.
_NOT_COLLECTED = "(not collected)"
# An item's scores at one round: its totals over all of its samples so far, whether any looped, any truncated.
RoundScore = tuple[ItemTotals, bool, bool]


@dataclass
class SuiteRun:
    plan: SuitePlan
    order: list[str]
    seed: int
    rule: SequentialSuite
    # Tests still to report per (item, round); an item's round is scored when its count reaches 0.
    pending: dict[tuple[str, int], int] = field(default_factory=dict)
    # Per item, its score after each round it reported (0: round 1; later rounds in a design with rounds).
    scored: dict[str, dict[int, RoundScore]] = field(default_factory=dict)
    fed: int = 0
    blocked_by: str | None = None
    # Filled when the suite stops early: what was not sent because of it.
    cancelled_items: list[str] = field(default_factory=list)
    requests_saved: int = 0
    output_tokens_saved: int = 0
    # Baseline items this run did not collect: the rule cannot feed past the first of them.
    uncollected: frozenset[str] = frozenset()
    # Why the suite was not judged: another suite's FAIL had already decided the gate (--k3-stop-on-fail).
    left_unjudged: str | None = None

    @property
    def design(self) -> SequentialDesign:
        return self.rule.design

    @property
    def selected(self) -> list[str]:
        return self.order[: self.design.max_items]

    def round_of(self, first_sample: int) -> int:
        """The round (0 for the first) whose tests send samples from `first_sample` on."""
        return 0 if first_sample == 0 else self.design.round_samples.index(first_sample) + 1

    def round_of_look(self, look: int) -> int:
        return self.design.round_samples.index(self.design.samples[look]) if self.design.has_rounds else 0

    @property
    def send_ahead_to(self) -> tuple[int, int]:
        """How far requests may run ahead of the tests, as (round, items into the order): to the next
        look's last item. Every item before it serves the next decision (the monitors' after each
        item, the look's at its end); one past it is wasted whenever that decision stops the suite."""
        if self.rule.stop is not None:
            return (0, self.fed)
        look = len(self.rule.looks)
        return (self.round_of_look(look), self.design.sizes[look])

    def has_round(self, item: str, round_: int) -> bool:
        return round_ in self.scored.get(item, {})

    def used(self, item: str, round_: int) -> bool:
        """Whether the rule has this item's round (its requests are finished and fed)."""
        if round_ == 0:
            return item in self.selected[: self.fed]
        return self.has_round(item, round_)

    def added_samples(self, item: str, round_: int, samples: int) -> bool:
        """Whether the item's score (over all rounds so far) holds samples of this round: a later round
        that could not be scored (an infrastructure error) leaves the earlier rounds' totals."""
        if round_ == 0:
            return True
        before = self.scored.get(item, {}).get(round_ - 1)
        return before is not None and samples > before[0].samples

    @property
    def samples_used(self) -> int:
        """The samples the decision used: every fed item's, at the last round looked at."""
        last = self.design.round_looks(len(self.rule.looks))
        return sum(self.scored[item][last][0].samples for item in self.selected[: self.fed])

    def round_totals(self) -> dict[str, list[list[Any]]]:
        """Per item, [samples, correct, looping, truncated] after each round it reported (for compare's
        replay: the summary's per-item totals hold every round's samples together). Empty without rounds."""
        if not self.design.has_rounds:
            return {}
        table: dict[str, list[list[Any]]] = {}
        for item in self.selected:
            reported = []
            for round_ in range(len(self.design.round_samples)):
                if not self.has_round(item, round_):
                    break
                totals, looping, truncated = self.scored[item][round_]
                reported.append([totals.samples, totals.correct, looping, truncated])
            if reported:
                table[item] = reported
        return table


@dataclass(frozen=True)
class Decided:
    """A FAIL the rest of the run cannot change: the gate's verdict is the worst of its findings, and
    FAIL is the worst there is."""

    suite: str
    stop: Stop

    @property
    def reason(self) -> str:
        return (
            f"the gate's verdict was already FAIL ({self.suite}: sequential FAIL by the {self.stop.by} after "
            f"{self.stop.items} items)"
        )


@dataclass
class SequentialRun:
    """Every sequentially gated suite of one run."""

    baseline: StoredRun
    suites: dict[str, SuiteRun] = field(default_factory=dict)
    ranks: dict[str, dict[str, int]] = field(default_factory=dict)
    # The tests of later rounds (node id → their probe's first sample); every other test is of round 1.
    round_tests: dict[str, int] = field(default_factory=dict)
    # The suite whose FAIL decided the gate's verdict whatever follows, and why (--k3-stop-on-fail).
    decided: Decided | None = None

    @classmethod
    def start(
        cls,
        baseline: StoredRun,
        options: GateSettings,
        run_id: str,
        collected: Mapping[str, Mapping[str, str]],
        *,
        partner: StoredRun | None = None,
    ) -> SequentialRun:
        """Plan each accuracy suite of the baseline on the baseline's scored items, whatever this run
        collected; `collected` maps each suite's collected items to their kinds.

        The plan and the committed order are the baseline's: a run that collected fewer items (-k,
        node ids, --k3-limit, --deselect) has holes in the order, and the rule stops at the first one
        (`blocked_by`) with no decision, so the gate keeps the coverage finding. Planning on the
        collected items instead made a subset look like the whole (issue 21, reproduction 1)."""
        run = cls(baseline)
        for suite in sorted(baseline.scored_suites()):
            known = {item for item, totals in baseline.item_totals(suite).items() if totals.samples}
            mine = collected.get(suite, {})
            if not known & mine.keys():
                continue
            # Items not collected get a kind of their own: the order stays independent of the outcomes.
            kinds = {item: mine.get(item, _NOT_COLLECTED) for item in known}
            order, seed = committed_order(kinds, run_id, suite)
            try:
                plan = _plan_on(baseline, options, partner, suite, order)
            except ValueError:
                # No plan for this suite (a margin of 0): it runs fixed-size; the header said why.
                continue
            rule = suite_rule(plan.run_design, baseline, suite, order, options)
            run.suites[suite] = SuiteRun(
                plan=plan, order=order, seed=seed, rule=rule, uncollected=frozenset(known - mine.keys())
            )
            run.ranks[suite] = {item: rank for rank, item in enumerate(order)}
        return run

    def rank(self, suite: str, item: str) -> int | None:
        """An item's place in its suite's committed order; None for items outside the rule."""
        return self.ranks.get(suite, {}).get(item)

    def beyond_maximum(self, suite: str, item: str) -> bool:
        entry = self.suites.get(suite)
        rank = self.rank(suite, item)
        return entry is not None and rank is not None and rank >= entry.design.max_items

    def rounds_of(self, suite: str) -> tuple[int, ...]:
        """Samples per item after each round of a suite sampled in rounds; () for any other suite."""
        entry = self.suites.get(suite)
        return entry.design.round_samples if entry is not None else ()

    def may_send(self, suite: str, item: str, first_sample: int = 0) -> bool:
        """Whether the runner may send this item's requests (of the round from `first_sample`) ahead of its tests now."""
        entry = self.suites.get(suite)
        rank = self.rank(suite, item)
        if entry is None or rank is None:
            return True
        round_, reach = entry.round_of(first_sample), entry.send_ahead_to
        return (round_, rank) < reach

    def expect_tests(self, suite: str, item: str, first_sample: int = 0) -> None:
        entry = self.suites.get(suite)
        if entry is not None and item in entry.order:
            key = (item, entry.round_of(first_sample))
            entry.pending[key] = entry.pending.get(key, 0) + 1

    def used(self, suite: str, item: str, first_sample: int = 0) -> bool:
        """Whether the rule has fed this item's requests (of the round from `first_sample`)."""
        entry = self.suites.get(suite)
        return entry is not None and entry.used(item, entry.round_of(first_sample))

    def stopped(self, suite: str) -> Stop | None:
        entry = self.suites.get(suite)
        return entry.rule.stop if entry is not None else None

    def decide(self, suite: str, stop: Stop) -> Decided | None:
        """Note a suite's stop; when it is a FAIL (the first), the gate's verdict is decided and every
        suite without a decision of its own is left unjudged. Returns the decision it made, if any."""
        if stop.verdict != FAIL or self.decided is not None:
            return None
        self.decided = Decided(suite, stop)
        for entry in self.suites.values():
            if entry.rule.stop is None:
                entry.left_unjudged = self.decided.reason
        return self.decided

    def test_done(self, suite: str, item: str, score: Any | None, first_sample: int = 0) -> Stop | None:
        """One test of an item (of the round from `first_sample`) reported; `score` is the item's ItemScore
        so far, over all rounds (None: this test did not score it). Returns the suite's stop when this
        report made the rule decide."""
        entry = self.suites.get(suite)
        round_ = entry.round_of(first_sample) if entry is not None else 0
        if entry is None or (item, round_) not in entry.pending or entry.rule.stop is not None:
            return None
        entry.pending[(item, round_)] -= 1
        if entry.pending[(item, round_)] > 0:
            return None
        if score is None or not score.samples or not entry.added_samples(item, round_, int(score.samples)):
            entry.blocked_by = entry.blocked_by or item
        else:
            totals = ItemTotals(int(score.samples), float(score.correct))
            entry.scored.setdefault(item, {})[round_] = (totals, score.looping > 0, score.truncated > 0)
        return self._feed(entry) or self._feed_rounds(entry)

    def _feed(self, entry: SuiteRun) -> Stop | None:
        baseline = self.baseline.item_totals(entry.plan.suite)
        while entry.rule.stop is None and entry.fed < len(entry.selected):
            item = entry.selected[entry.fed]
            if item in entry.uncollected:
                entry.blocked_by = entry.blocked_by or item
                return None
            if not entry.has_round(item, 0):
                return None
            totals, looping, truncated = entry.scored[item][0]
            entry.fed += 1
            stop = entry.rule.add(baseline[item], totals, looping=looping, truncated=truncated)
            if stop is not None:
                return stop
        return None

    def _feed_rounds(self, entry: SuiteRun) -> Stop | None:
        """Take each round's look once every selected item has reported that round (the order is complete)."""
        while entry.rule.awaits_round:
            round_ = entry.round_of_look(len(entry.rule.looks))
            if not all(entry.has_round(item, round_) for item in entry.selected):
                return None
            stop = entry.rule.add_round([entry.scored[item][round_][0] for item in entry.selected])
            if stop is not None:
                return stop
        return None

    def note_cancelled(self, suite: str, cancelled: list[Probe], spent: Mapping[tuple[str, str], Spend]) -> None:
        """Estimate what stopping the suite saved: what the candidate spent per sample on the items it
        scored in round 1, times the samples it cancelled, less what those probes had sent before the
        stop (a conversation cancelled in flight). An estimate: the counts come from the records."""
        entry = self.suites[suite]
        # A suite can be cancelled twice: at its own stop, then when another suite's FAIL decides the gate.
        entry.cancelled_items = list(dict.fromkeys([*entry.cancelled_items, *(probe.item for probe in cancelled)]))
        first_round = {item: rounds[0] for item, rounds in entry.scored.items() if 0 in rounds}
        used = [spent.get((suite, item), Spend()) for item in first_round]
        samples = sum(score[0].samples for score in first_round.values())
        already = Spend()
        for probe in cancelled:
            already.add(spent.get(probe.key, Spend()))
        if used and samples:
            per_item = samples / len(used)
            cancelled_samples = sum(probe.samples or per_item for probe in cancelled)
            share = cancelled_samples / samples
            requests = sum(spend.requests for spend in used) * share
            tokens = sum(spend.output_tokens for spend in used) * share
            entry.requests_saved += max(0, round(requests) - already.requests)
            entry.output_tokens_saved += max(0, round(tokens) - already.output_tokens)

    def to_summary(self) -> dict[str, Any]:
        """For summary.json and gate.json: per suite the order, the seed, the whole path and the savings."""
        return {
            suite: suite_path(
                entry.rule,
                order=entry.order,
                seed=entry.seed,
                samples_used=entry.samples_used,
                round_totals=entry.round_totals(),
                blocked_by=entry.blocked_by,
                cancelled_items=entry.cancelled_items,
                requests_saved=entry.requests_saved,
                output_tokens_saved=entry.output_tokens_saved,
                maximum_capped_by=entry.plan.maximum_capped_by,
                left_unjudged=entry.left_unjudged,
            )
            for suite, entry in self.suites.items()
        }


def suite_path(
    rule: SequentialSuite,
    *,
    order: list[str],
    seed: int | None,
    samples_used: int,
    round_totals: Mapping[str, list[list[Any]]],
    blocked_by: str | None,
    cancelled_items: list[str],
    requests_saved: int,
    output_tokens_saved: int,
    maximum_capped_by: str | None,
    left_unjudged: str | None = None,
) -> dict[str, Any]:
    """One suite's sequential block, as the run stores it and `compare` replays it.
    `maximum_capped_by`: the option that cut the plan's maximum (SuitePlan.maximum_capped_by)."""
    stop, maximum = rule.stop, rule.design.max_items
    # A suite sampled in rounds keeps each item's score after each round: the summary's totals
    # hold every round together, and compare's replay needs the looks' own (an item-only suite's
    # block is as before rounds existed).
    rounds = {"round_totals": dict(round_totals)} if rule.design.has_rounds else {}
    return {
        **rule.to_dict(),
        **rounds,
        "order_seed": seed,
        "order": order,
        "max_items": maximum,
        "maximum_capped_by": maximum_capped_by,
        "samples_used": samples_used,
        "blocked_by": blocked_by,
        "stopped_early": stop is not None and stop.items < maximum,
        "cancelled_items": cancelled_items,
        "requests_saved": requests_saved,
        "output_tokens_saved": output_tokens_saved,
        # Only in a run another suite's FAIL decided (--k3-stop-on-fail): blocks of earlier runs are unchanged.
        **({"left_unjudged": left_unjudged} if left_unjudged and stop is None else {}),
    }


def verdict_lines(paths: Mapping[str, Any]) -> list[str]:
    """One line per suite of a run's sequential paths (`to_summary`, as stored in summary.json):
    where it stopped, what it used of the maximum, what it saved."""
    lines = []
    for suite, path in sorted(paths.items()):
        stop, maximum = path["stop"], path["max_items"]
        if stop is None:
            blocked = path["blocked_by"]
            reason = f"blocked at item {blocked} (not scored)" if blocked else "not finished"
            if path.get("left_unjudged"):
                reason = f"left unjudged: {path['left_unjudged']}"
            lines.append(f"{suite}: no sequential decision ({reason}; {path['items']} of {maximum} items fed)")
            continue
        where = f"look {stop['look']} of {len(path['design']['sizes'])}" if stop["by"] == "look" else stop["by"]
        if stop["by"] == BY_MAXIMUM and path.get("maximum_capped_by"):
            where += f" (cut by {path['maximum_capped_by']})"
        seen = look_samples(path["design"], stop["look"]) if stop["by"] in ("look", BY_MAXIMUM) else ""
        where += f" ({seen})" if seen else ""
        saved = (
            f"; about {path['requests_saved']} requests and {path['output_tokens_saved']} output tokens saved"
            if path["requests_saved"]
            else ""
        )
        # Undecided after the last round: more candidate samples would not help (issue 15's "what
        # more samples cannot resolve"); what is left is between items and in the baseline's own noise.
        limit = (
            "; what is left after the last round is the spread between items and the baseline's own sampling "
            "noise: more items (or a baseline with more samples) can resolve it, more candidate samples cannot"
            if stop["by"] == BY_MAXIMUM and seen
            else ""
        )
        lines.append(
            f"{suite}: sequential {stop['verdict']} by the {where} after {stop['items']} of {maximum} items "
            f"({path['samples_used']} samples){saved}{limit}"
        )
    return lines


def monitored_floor(floor: float, baseline_events: int, baseline_items: int) -> float:
    """The rate monitor's null: the larger of the floor and the baseline's own rate on the items
    the rule may feed. The monitor asks whether the candidate loops (truncates) more than a
    healthy deployment does; a floor under the baseline's own rate would FAIL an unchanged
    deployment that loops as often as the baseline. Kept under 1/2, where no alternative of the
    mixture (5× and up) is left and the monitor stays silent."""
    rate = baseline_events / baseline_items if baseline_items else 0.0
    return min(max(floor, rate), 0.5)


def suite_rule(
    design: SequentialDesign, baseline: StoredRun, suite: str, order: list[str], settings: GateSettings
) -> SequentialSuite:
    """The suite's rule, its monitors' floors set from the gate's floors and the baseline (for the
    run and for its replay by `compare`, which must build the same rule)."""
    items = set(order[: design.max_items]) & set(baseline.item_totals(suite))
    floors = {
        name: monitored_floor(settings.floor_of(name), *baseline.event_count(suite, event, items))
        for name, event in RATE_EVENTS.items()
    }
    return SequentialSuite(design, looping_floor=floors["looping"], truncation_floor=floors["truncation"])


def _plan_on(
    baseline: StoredRun, options: GateSettings, partner: StoredRun | None, suite: str, order: list[str]
) -> SuitePlan:
    totals = baseline.item_totals(suite)
    return plan_items(
        suite, {item: totals[item] for item in order}, options, partner, gated_suites=gated_suite_count(baseline)
    )
