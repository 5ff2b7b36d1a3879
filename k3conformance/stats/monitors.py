"""Always-valid monitors, checked after every item: they may stop a suite with FAIL at once.

Group-sequential looks (sequential.py) are for the close calls. The published MegaMoE case
is not close: more than half of its outputs loop to the token limit, and each of them costs
a 32-GPU deployment minutes. These monitors stop such a suite after a handful of items, and
stay valid however often they are checked, because each is a nonnegative supermartingale
under its null (Ville's inequality: it ever reaches 1/α with probability at most α):

- `RateMonitor`: a mixture SPRT of "rate ≤ floor" (looping, truncation), one item at a time:
  the average, with fixed equal weights, of Wald's likelihood ratios against the rates 5×,
  12.5× and 25× the floor, FAIL when it reaches 1/α. Each ratio is a supermartingale under any
  rate at or below the floor, so their fixed average is one too, and the false alarm is at
  most α whatever the true rate below the floor is (not only at the floor). Why a mixture and
  not the single 5× alternative: the published MegaMoE case loops on 57 of 113 outputs, 25×
  a 2% floor, and against 5× it takes about 4 looping items to stop (a median of 7 items at
  that rate, 11 at 35%); the mixture stops on any 3 looping items among the first 9, and
  after a median of 5 items at 50%, 8 at 35%. The price is paid at rates near 5× the floor,
  where the 5× ratio carries a third of the weight: a median of 64 items instead of 56 at a 10% rate (tests/
  test_sequential_calibration.py and benchmarks/bench_sequential_gate.py measure both).
- `AccuracyMonitor`: a betting e-process (Waudby-Smith and Ramdas, "Estimating means of
  bounded random variables by betting", 2023) for H0 "change ≥ −margin" on the paired item
  differences d ∈ [−1, 1]: the wealth Π(1 + λ_i(−m − d_i)) with a bet λ_i chosen from the
  items before i only (aGRAPA, clipped), FAIL when the wealth reaches 1/α. It assumes no
  discordance and no distribution, only that items are independent.

Both monitors see items in the pre-committed order, never in completion order: looping
outputs are the longest and finish last, so a completion-order monitor would see the healthy
items first. Only the FAIL side is monitored: an always-valid PASS would need far more items
than the group-sequential one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

# The monitors' level: checked after every item, each spends at most this much false FAIL.
MONITOR_ALPHA = 0.005
# The rate monitors' alternatives, as multiples of the floor, averaged with equal weights: 5×
# as before, 25× where the published MegaMoE case lies (50% of outputs looping at a 2% floor),
# and 12.5× between them. Alternatives at or above a rate of 1 (a high floor) are left out.
RATE_RATIOS: tuple[float, ...] = (5.0, 12.5, 25.0)
# Largest bet, as a share of the largest bet that keeps the wealth nonnegative.
_BET_CAP = 0.5


@dataclass
class RateMonitor:
    """Mixture SPRT of an event's rate (looping, truncation) ≤ floor against rates of ratio × floor."""

    name: str
    floor: float
    alpha: float = MONITOR_ALPHA
    ratios: tuple[float, ...] = RATE_RATIOS
    items: int = 0
    events: int = 0
    # Log of the mixture's likelihood ratio: the average of the alternatives' ratios.
    log_ratio: float = 0.0
    # The item count at which the monitor stopped the suite; None while it has not.
    stopped_at: int | None = None
    # Each alternative's log likelihood ratio.
    _logs: list[float] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if not 0 < self.floor < 1:
            raise ValueError(f"{self.name}: a floor of {self.floor} is not a rate between 0 and 1")
        if not self.ratios or min(self.ratios) <= 1:
            raise ValueError(f"{self.name}: the alternatives must be rates above the floor, got {self.ratios}×")
        # An alternative rate must lie below 1; dropping one keeps the average a supermartingale.
        # With none left (a floor of 20% or more) the monitor never fires: the looks decide alone.
        self.ratios = tuple(ratio for ratio in self.ratios if self.floor * ratio < 1)
        highs = [self.floor * ratio for ratio in self.ratios]
        self._event_steps = [math.log(high / self.floor) for high in highs]
        self._clean_steps = [math.log((1 - high) / (1 - self.floor)) for high in highs]
        self._logs = [0.0] * len(highs)

    def observe(self, event: bool) -> bool:
        """Add one item; True when the monitor stops the suite (now or earlier)."""
        if self.stopped_at is not None:
            return True
        self.items += 1
        self.events += int(event)
        if not self.ratios:
            return False
        steps = self._event_steps if event else self._clean_steps
        self._logs = [log + step for log, step in zip(self._logs, steps, strict=True)]
        top = max(self._logs)
        self.log_ratio = top + math.log(sum(math.exp(log - top) for log in self._logs) / len(self._logs))
        if self.log_ratio >= math.log(1 / self.alpha):
            self.stopped_at = self.items
        return self.stopped_at is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "floor": self.floor,
            "alpha": self.alpha,
            "ratios": list(self.ratios),
            "items": self.items,
            "events": self.events,
            "log_ratio": self.log_ratio,
            "log_ratios": list(self._logs),
            "threshold": math.log(1 / self.alpha),
            "stopped_at": self.stopped_at,
        }


@dataclass
class AccuracyMonitor:
    """Betting e-process against H0 "mean paired difference ≥ −margin"; FAIL at wealth ≥ 1/α."""

    margin: float
    alpha: float = MONITOR_ALPHA
    items: int = 0
    log_wealth: float = 0.0
    stopped_at: int | None = None
    # Running sums of x = −m − d (positive on average under a loss beyond the margin).
    _sum: float = field(default=0.0, repr=False)
    _sum_squares: float = field(default=0.0, repr=False)

    def bet(self) -> float:
        """aGRAPA: the growth-optimal bet for the mean and variance seen so far (with a prior
        item's worth of shrinkage), clipped to [0, cap / (1 + m)] so the wealth stays positive."""
        count = self.items + 1
        mean = self._sum / count
        second = (self._sum_squares + 1.0) / count
        if mean <= 0:
            return 0.0
        return min(mean / second, _BET_CAP / (1 + self.margin))

    def observe(self, difference: float) -> bool:
        """Add one item's candidate − baseline score (in [−1, 1]); True when the monitor stops the suite."""
        if self.stopped_at is not None:
            return True
        if not -1 <= difference <= 1:
            raise ValueError(f"a paired difference of scores in [0, 1] lies in [-1, 1], got {difference}")
        excess = -self.margin - difference
        self.log_wealth += math.log1p(self.bet() * excess)
        self.items += 1
        self._sum += excess
        self._sum_squares += excess * excess
        if self.log_wealth >= math.log(1 / self.alpha):
            self.stopped_at = self.items
        return self.stopped_at is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "margin": self.margin,
            "alpha": self.alpha,
            "items": self.items,
            "log_wealth": self.log_wealth,
            "threshold": math.log(1 / self.alpha),
            "stopped_at": self.stopped_at,
        }
