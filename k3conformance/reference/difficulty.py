"""Items with a difficulty of their own: how likely the simulated model is to solve each item.

A real model does not flip one coin per answer at its mean accuracy: some items it solves
nearly always, some nearly never, and only the items between spread its answers. That is
what decides what a PASS costs (an item solved always or never disagrees with nothing), so a
simulator whose items are exchangeable coin flips measures the gate in a regime no real
deployment is in.

Each item draws a latent uniform `u` from its key alone (stable across run seeds and
profiles), and its solve chance is the `u`-quantile of a Beta distribution with the profile's
accuracy `μ` as its mean and a concentration `s`: Beta(μ·s, (1 − μ)·s). A sample is right when
its own draw (item, seed) falls under that chance. Two properties follow:

- the per-item chances average to `μ`, and their spread is set by `s` alone: the mean of
  p(1 − p) over items is μ(1 − μ)·s / (s + 1), so the share `r = s / (s + 1)` of the
  exchangeable spread μ(1 − μ) that stays within items is the one number to choose;
- a Beta quantile grows with its mean at a fixed `s`, so a less accurate profile's right
  answers stay a subset of a more accurate one's (the same item draw, the same sample draw).

`r` is not free to choose: it is measured. llama.cpp serving SmolLM2-135M-Instruct at
temperature 1.0, 80 items × 4 samples (`benchmarks/bench_real_engine.py --spread 4`,
docs/real-engine.md): accuracy 14.1%, mean p̂(1 − p̂) over items 0.079. With 4 samples an
item, p̂(1 − p̂) is biased low by 3/4, so the unbiased mean p(1 − p) is 0.105 against the
exchangeable 0.141 × 0.859 = 0.121: r = 0.87, s = 6.5. A real small model at temperature 1 is
nearly exchangeable; a large one is likely steadier (lower r), but no K3 figure is public, so
the simulator keeps the measured one, and `EXCHANGEABLE` (every item at the mean: r = 1) stays
available as the worst case (`reference:tp8+exchangeable`).
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache

__all__ = [
    "EXCHANGEABLE",
    "MEASURED_WITHIN_SHARE",
    "SPREAD_MODES",
    "concentration",
    "item_draw",
    "solve_chance",
    "within_share",
]

# The measured share r of the exchangeable spread that stays within items (module docstring).
MEASURED_WITHIN_SHARE = 0.105 / (0.141 * 0.859)
EXCHANGEABLE = "exchangeable"
MEASURED = "measured"
SPREAD_MODES = (MEASURED, EXCHANGEABLE)


def concentration(share: float) -> float:
    """The Beta concentration s with s / (s + 1) = share; infinite (exchangeable) at share 1."""
    if not 0.0 < share <= 1.0:
        raise ValueError(f"a within-item share must be in (0, 1], got {share}")
    return float("inf") if share >= 1.0 else share / (1.0 - share)


def within_share(mode: str) -> float:
    """The share r a spread mode stands for."""
    if mode == EXCHANGEABLE:
        return 1.0
    if mode == MEASURED:
        return MEASURED_WITHIN_SHARE
    raise ValueError(f"unknown item spread {mode!r}; known: {', '.join(SPREAD_MODES)}")


def item_draw(key: str) -> float:
    """The item's latent uniform on [0, 1): from its key alone, never from a seed or a profile."""
    digest = hashlib.sha256(json.dumps(["difficulty", key]).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@lru_cache(maxsize=65536)
def solve_chance(key: str, accuracy: float, mode: str = MEASURED) -> float:
    """The chance that one sample of item `key` is right, at mean accuracy `accuracy`."""
    if accuracy <= 0.0 or accuracy >= 1.0:
        return min(1.0, max(0.0, accuracy))
    s = concentration(within_share(mode))
    if s == float("inf"):
        return accuracy
    # scipy costs a client half a second to import: only the simulator's server draws chances.
    from scipy import stats

    return float(stats.beta.ppf(item_draw(key), accuracy * s, (1.0 - accuracy) * s))
