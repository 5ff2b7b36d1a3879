"""The pairwise covering design holds every allowed pair, only allowed combinations, and is the same every run."""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from k3conformance.stats.covering import covered_pairs, pairwise

FACTORS = {"a": ("0", "1", "2"), "b": ("x", "y"), "c": ("p", "q", "r"), "d": ("u", "v")}


def _no_2_with_r(combination: Mapping[str, str]) -> bool:
    return not (combination["a"] == "2" and combination["c"] == "r")


def test_every_allowed_pair_is_covered_and_nothing_forbidden_is_sent() -> None:
    design = pairwise(FACTORS, _no_2_with_r)
    assert all(_no_2_with_r(combination) for combination in design)
    everything = [dict(zip(FACTORS, values, strict=True)) for values in itertools.product(*FACTORS.values())]
    assert covered_pairs(design) == covered_pairs([c for c in everything if _no_2_with_r(c)])
    assert ("a", "2", "c", "r") not in covered_pairs(design)
    # Far fewer cells than the 36 of the full product (33 allowed); a x c has 8 allowed pairs.
    assert 8 <= len(design) < 15


def test_the_design_is_deterministic() -> None:
    assert pairwise(FACTORS, _no_2_with_r) == pairwise(FACTORS, _no_2_with_r)
