"""One suite's sequential decision, fed item by item in the pre-committed order.

The runner (and the calibration simulation, so that both run the same rule) hands over each
item as soon as it and every item before it in the committed order have finished: the
always-valid monitors (monitors.py) are checked after every item, the group-sequential
look (sequential.py) when the count reaches a planned size. The first of them that decides
stops the suite; at the maximum size with no decision the suite ends INCONCLUSIVE. A design
with rounds (sequential.rounds_design) then takes one look per round of more samples on every
item (`add_round`), and ends INCONCLUSIVE after the last round.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from k3conformance.stats.group_sequential import Look, SequentialDesign, evaluate_look
from k3conformance.stats.monitors import MONITOR_ALPHA, AccuracyMonitor, RateMonitor
from k3conformance.stats.paired import FAIL, INCONCLUSIVE, PASS, ItemTotals, Verdict

# What stopped a suite.
BY_LOOK = "look"
BY_LOOPING = "looping monitor"
BY_TRUNCATION = "truncation monitor"
BY_ACCURACY = "accuracy monitor"
BY_MAXIMUM = "maximum reached"


@dataclass(frozen=True)
class Stop:
    verdict: Verdict
    by: str
    # The items of the committed order the decision used.
    items: int
    # The look it stopped at (1-based), or the look the monitors stopped before.
    look: int


@dataclass
class SequentialSuite:
    design: SequentialDesign
    looping_floor: float
    truncation_floor: float
    monitor_alpha: float = MONITOR_ALPHA
    looks: list[Look] = field(default_factory=list)
    stop: Stop | None = None
    _baseline: list[ItemTotals] = field(default_factory=list)
    _candidate: list[ItemTotals] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.looping = RateMonitor("looping", self.looping_floor, self.monitor_alpha)
        self.truncation = RateMonitor("truncation", self.truncation_floor, self.monitor_alpha)
        self.accuracy = AccuracyMonitor(self.design.margin, self.monitor_alpha)

    @property
    def items(self) -> int:
        return len(self._candidate)

    def add(self, baseline: ItemTotals, candidate: ItemTotals, *, looping: bool, truncated: bool) -> Stop | None:
        """The next item of the committed order; the decision when this item ends the suite."""
        if self.stop is not None:
            return self.stop
        self._baseline.append(baseline)
        self._candidate.append(candidate)
        look = len(self.looks) + 1
        # Every monitor sees every item, so that each keeps its own record, whichever fires first.
        fired = [
            name
            for name, monitor_fired in (
                (BY_LOOPING, self.looping.observe(looping)),
                (BY_TRUNCATION, self.truncation.observe(truncated)),
                (BY_ACCURACY, self.accuracy.observe(candidate.mean - baseline.mean)),
            )
            if monitor_fired
        ]
        if fired:
            self.stop = Stop(FAIL, fired[0], self.items, look)
            return self.stop
        if self.items == self.design.sizes[len(self.looks)]:
            self._look(self._candidate)
        return self.stop

    @property
    def awaits_round(self) -> bool:
        """Whether the next look is a round's (every item at more samples), not an item look of round 1."""
        return self.stop is None and self.items == self.design.max_items and len(self.looks) < len(self.design.sizes)

    def add_round(self, candidate: Sequence[ItemTotals]) -> Stop | None:
        """The next round's look: every item of the committed order up to the maximum, in that order,
        its candidate score over all of its samples so far. The monitors saw round 1 only: they assume
        independent items, and a round repeats the same items."""
        if not self.awaits_round:
            raise ValueError(f"no round look is due after {len(self.looks)} looks at {self.items} items")
        self._look(candidate)
        return self.stop

    def _look(self, candidate: Sequence[ItemTotals]) -> None:
        result = evaluate_look(self.design, len(self.looks), self._baseline, candidate)
        self.looks.append(result)
        if result.verdict in (PASS, FAIL):
            self.stop = Stop(result.verdict, BY_LOOK, self.items, result.look)
        elif len(self.looks) == len(self.design.sizes):
            self.stop = Stop(INCONCLUSIVE, BY_MAXIMUM, self.items, result.look)

    def to_dict(self) -> dict[str, Any]:
        """The whole path: design, every look against its bounds, the monitors and the stop."""
        return {
            "design": self.design.to_dict(),
            "looks": [look.to_dict() for look in self.looks],
            "monitors": {
                "looping": self.looping.to_dict(),
                "truncation": self.truncation.to_dict(),
                "accuracy": self.accuracy.to_dict(),
            },
            "stop": None if self.stop is None else vars(self.stop),
            "items": self.items,
        }
