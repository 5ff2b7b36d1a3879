"""Covering designs: a small set of combinations of factor levels in which every pair of levels
of any two factors appears at least once (pairwise, strength 2).

Deterministic and greedy (the AETG idea, without its randomness): from every allowed full
combination, repeatedly take the one that covers the most pairs not yet covered, the first in
the factors' own order on ties. A pair that no allowed combination holds is impossible, not
missed, so only pairs some allowed combination holds are asked for. Exhaustive over the
allowed combinations, which is cheap for a few thousand of them (the API contract's 1,200).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence

Combination = tuple[str, ...]
Pair = tuple[int, str, int, str]


def _pairs(combination: Combination) -> set[Pair]:
    return {
        (first, combination[first], second, combination[second])
        for first, second in itertools.combinations(range(len(combination)), 2)
    }


def pairwise(
    factors: Mapping[str, Sequence[str]], allowed: Callable[[Mapping[str, str]], bool]
) -> list[dict[str, str]]:
    """A pairwise covering design of `factors` (name -> levels), each combination a dict of
    name -> level for which `allowed` holds."""
    names = list(factors)
    candidates = [
        combination
        for combination in itertools.product(*(factors[name] for name in names))
        if allowed(dict(zip(names, combination, strict=True)))
    ]
    pairs_of = {combination: _pairs(combination) for combination in candidates}
    uncovered: set[Pair] = set().union(*pairs_of.values())
    chosen: list[Combination] = []
    while uncovered:
        # max() keeps the first of equal counts: the design is the same on every run.
        best = max(candidates, key=lambda combination: len(pairs_of[combination] & uncovered))
        chosen.append(best)
        uncovered -= pairs_of[best]
    return [dict(zip(names, combination, strict=True)) for combination in chosen]


def covered_pairs(design: Sequence[Mapping[str, str]]) -> set[tuple[str, str, str, str]]:
    """Every (factor, level, factor, level) pair the design holds, in both orders of the factors."""
    found: set[tuple[str, str, str, str]] = set()
    for combination in design:
        for first, second in itertools.permutations(list(combination), 2):
            found.add((first, combination[first], second, combination[second]))
    return found
