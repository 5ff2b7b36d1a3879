"""The summary's accuracy interval: Wilson's, over the items' effective number."""

from __future__ import annotations

import math

import pytest

from k3conformance.scoring.item_score import ItemScore, effective_count, summarize, wilson_interval


def scores(means: list[tuple[int, int]]) -> dict[str, ItemScore]:
    """(correct, samples) per item."""
    result = {}
    for index, (correct, samples) in enumerate(means):
        score = ItemScore()
        for sample in range(samples):
            score.add(float(sample < correct), answered=True, truncated=False, output_tokens=10)
        result[f"item-{index}"] = score
    return result


def test_six_right_items_do_not_collapse_to_a_point() -> None:
    accuracy = summarize(scores([(1, 1)] * 6))
    assert accuracy is not None and accuracy.accuracy == 1.0
    # Wald said [100%, 100%]; Wilson's lower bound at 6 of 6 is z²/(n + z²).
    z2 = 1.959963984540054**2
    assert accuracy.low == pytest.approx(6 / (6 + z2)) and accuracy.low == pytest.approx(0.6097, abs=1e-4)
    assert accuracy.high == 1.0


def test_binary_items_give_the_textbook_wilson_interval() -> None:
    # 7 of 10: Wilson 95% is [39.7%, 89.2%] (Newcombe 1998, method 3).
    accuracy = summarize(scores([(1, 1)] * 7 + [(0, 1)] * 3))
    assert accuracy is not None
    assert (round(accuracy.low, 3), round(accuracy.high, 3)) == (0.397, 0.892)
    assert wilson_interval(0.7, 10) == (accuracy.low, accuracy.high)


def test_several_samples_per_item_count_between_the_items_and_the_samples() -> None:
    # Items that differ less than their samples do are worth more than their number, never more than the samples.
    means = [0.5, 0.75, 0.25, 0.5]
    count = effective_count(means, samples=16)
    assert 4 <= count <= 16
    # Items that disagree completely are worth their number.
    assert effective_count([1.0, 0.0, 1.0, 0.0], samples=16) == pytest.approx(4)
    assert effective_count([1.0] * 4, samples=16) == 4
    low, high = wilson_interval(0.5, count)
    assert 0 < low < 0.5 < high < 1 and not math.isclose(low, high)
