"""Always-valid monitors, checked after every item: they may stop a suite with FAIL at once.

Group-sequential looks (sequential.py) are for the close calls. The published MegaMoE case
is not close: more than half of its outputs loop to the token limit, and each of them costs
a 32-GPU deployment minutes. These monitors stop such a suite after a handful of items, and
stay valid however often they are checked, because each is a nonnegative supermartingale
under its null (Ville's inequality: it ever reaches 1/α with probability at most α):

- `RateMonitor`: Wald's SPRT of "rate ≤ floor" against "rate ≥ ratio × floor" (looping,
  truncation), one item at a time, FAIL when the likelihood ratio reaches 1/α. Under any rate
  at or below the floor the ratio is a supermartingale, so the false alarm is at most α
  whatever the true rate below the floor is (not only at the floor).
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
from dataclasses import asdict, dataclass, field
from typing import Any

# The monitors' level: checked after every item, each spends at most this much false FAIL.
MONITOR_ALPHA = 0.005
# The looping SPRT's alternative: a rate this many times the floor.
RATE_RATIO = 5.0
# Largest bet, as a share of the largest bet that keeps the wealth nonnegative.
_BET_CAP = 0.5


@dataclass
class RateMonitor:
    """SPRT of an event's rate (looping, truncation) ≤ floor against ≥ ratio × floor."""

    name: str
    floor: float
    alpha: float = MONITOR_ALPHA
    ratio: float = RATE_RATIO
    items: int = 0
    events: int = 0
    log_ratio: float = 0.0
    # The item count at which the monitor stopped the suite; None while it has not.
    stopped_at: int | None = None

    def __post_init__(self) -> None:
        if not 0 < self.floor < 1 or self.floor * self.ratio >= 1:
            raise ValueError(
                f"{self.name}: a floor of {self.floor} cannot be monitored at {self.ratio}× (needs floor·ratio < 1)"
            )
        high = self.floor * self.ratio
        self._event_step = math.log(high / self.floor)
        self._clean_step = math.log((1 - high) / (1 - self.floor))

    def observe(self, event: bool) -> bool:
        """Add one item; True when the monitor stops the suite (now or earlier)."""
        if self.stopped_at is not None:
            return True
        self.items += 1
        self.events += int(event)
        self.log_ratio += self._event_step if event else self._clean_step
        if self.log_ratio >= math.log(1 / self.alpha):
            self.stopped_at = self.items
        return self.stopped_at is not None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "threshold": math.log(1 / self.alpha)}


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
