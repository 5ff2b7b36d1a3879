"""Items with a difficulty of their own (reference/difficulty.py): the simulated A/A pair disagrees
the way the measured real model does, not as exchangeable coin flips do."""

from __future__ import annotations

import statistics

import pytest

from k3conformance.reference.difficulty import (
    EXCHANGEABLE,
    MEASURED,
    MEASURED_WITHIN_SHARE,
    concentration,
    item_draw,
    solve_chance,
)
from k3conformance.reference.profiles import get_profile

KEYS = [f"suite/item-{index}" for index in range(3000)]


@pytest.mark.parametrize("accuracy", [0.141, 0.5, 0.68, 0.9])
def test_the_chances_average_to_the_accuracy_and_spread_by_the_measured_share(accuracy: float) -> None:
    chances = [solve_chance(key, accuracy) for key in KEYS]
    assert statistics.mean(chances) == pytest.approx(accuracy, abs=0.012)
    within = statistics.mean(p * (1 - p) for p in chances)
    assert within == pytest.approx(MEASURED_WITHIN_SHARE * accuracy * (1 - accuracy), rel=0.06)
    # Exchangeable: every item at the mean, the most within-item spread there is.
    assert {solve_chance(key, accuracy, EXCHANGEABLE) for key in KEYS[:50]} == {accuracy}


def test_the_measured_share_is_the_real_engines_figure_unbiased() -> None:
    # bench_real_engine.py --spread 4: accuracy 14.1%, mean p̂(1 − p̂) 0.079 over 4 samples (biased by 3/4).
    assert pytest.approx((0.079 * 4 / 3) / (0.141 * 0.859), rel=0.01) == MEASURED_WITHIN_SHARE
    assert concentration(MEASURED_WITHIN_SHARE) == pytest.approx(6.5, abs=0.1)
    assert concentration(1.0) == float("inf")


def test_an_items_chance_is_its_own_and_a_worse_profile_solves_a_subset() -> None:
    assert item_draw("math/a") == item_draw("math/a") != item_draw("math/b")
    for key in KEYS[:300]:
        assert solve_chance(key, 0.655) <= solve_chance(key, 0.68) <= solve_chance(key, 0.9)


def test_the_profile_modifier_chooses_the_spread() -> None:
    assert get_profile("tp8").item_spread == MEASURED
    exchangeable = get_profile("tp8+exchangeable")
    assert exchangeable.item_spread == EXCHANGEABLE and exchangeable.base == "tp8"
    assert get_profile("tp8+sglang+exchangeable").parser == "sglang"
    with pytest.raises(KeyError, match="item spreads: measured, exchangeable"):
        get_profile("tp8+bogus")


def test_the_simulated_a_a_pair_disagrees_less_than_coin_flips() -> None:
    """Two seeds of one deployment: with item difficulty fewer items disagree than with exchangeable
    answers at the same accuracy; the figure a PASS costs is this discordance."""
    from k3conformance.reference.simulator import _unit_draw

    def discordance(mode: str) -> float:
        disagree = 0
        for key in KEYS:
            chance = solve_chance(key, 0.68, mode)
            disagree += (_unit_draw(key, 0) < chance) != (_unit_draw(key, 7) < chance)
        return disagree / len(KEYS)

    measured, exchangeable = discordance(MEASURED), discordance(EXCHANGEABLE)
    assert exchangeable == pytest.approx(2 * 0.68 * 0.32, abs=0.03)
    assert measured == pytest.approx(MEASURED_WITHIN_SHARE * exchangeable, abs=0.03)
    assert measured < exchangeable
