"""The small-model suite's items, scoring rules and the llama.cpp launch settings, without a
server: the generator is deterministic, the long-answer rules are strict about the end of
the answer, and an unknown launch setting stops the launch."""

from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest

from k3conformance.datasets.small_model_items import (
    GENERATOR_SEED,
    LONG_KINDS,
    LONG_RULES,
    SHORT_KINDS,
    generate_items,
    items_digest,
)
from k3conformance.deployment.llamacpp_params import apply_params, parse_param
from k3conformance.scoring.long_answers import (
    score_distinct_lines,
    score_number_run,
    score_word_count,
    score_word_run,
)

DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def test_items_are_the_same_for_a_seed_and_differ_across_seeds() -> None:
    first, again, other = generate_items(GENERATOR_SEED), generate_items(GENERATOR_SEED), generate_items(7)
    assert items_digest(first) == items_digest(again)
    assert items_digest(first) != items_digest(other)


def test_items_have_unique_ids_and_prompts_and_every_kind_its_count() -> None:
    items = generate_items()
    assert len({item.id for item in items}) == len(items)
    assert len({item.prompt for item in items}) == len(items)
    expected = {kind: count for kind, (_, count) in {**SHORT_KINDS, **LONG_KINDS}.items()}
    assert Counter(item.kind for item in items) == expected
    assert set(LONG_RULES) == set(LONG_KINDS)


def test_short_answers_are_right() -> None:
    by_prompt = {item.prompt: item.answer for item in generate_items()}
    for prompt, answer in by_prompt.items():
        if prompt.startswith("What is ") and " + " in prompt:
            left, right = prompt.removeprefix("What is ").split("?")[0].split(" + ")
            assert int(answer) == int(left) + int(right)


@pytest.mark.parametrize(
    ("response", "correct"),
    [
        ("The even numbers from 2 to 6 are: 2, 4, 6.", True),
        ("2, 4, 6, 8", False),  # goes on past the end
        ("2, 4", False),  # stops short
        (None, False),
    ],
)
def test_number_run_must_end_where_asked(response: str | None, correct: bool) -> None:
    assert score_number_run("2, 4, 6", response).correct is correct


def test_word_run_takes_the_days_in_order_and_nothing_more() -> None:
    gold = "Sunday, Monday, Tuesday, Wednesday, Thursday, Friday, Saturday"
    assert score_word_run(
        gold, DAYS, "They are Sunday, Monday, Tuesday, Wednesday, Thursday, Friday and Saturday."
    ).correct
    assert not score_word_run(gold, DAYS, "Monday, Tuesday, Wednesday, Thursday, Friday, Saturday, Sunday").correct
    assert not score_word_run(gold, DAYS, f"{gold}, Sunday, Monday").correct


def test_distinct_lines_count_marked_items_and_refuse_repeats() -> None:
    listed = "1. Red\n2. Blue\n3. Green\n\nThese are three colours."
    assert score_distinct_lines(3, listed).correct
    assert score_distinct_lines(3, "Colours:\nRed\nBlue\nGreen").correct
    assert not score_distinct_lines(3, "1. Red\n2. Blue\n3. Blue").correct
    assert not score_distinct_lines(3, "1. Red\n2. Blue").correct


def test_word_count_is_exact() -> None:
    assert score_word_count("cat", 3, "Cat, cat, CAT").correct
    assert not score_word_count("cat", 3, "Cat 3 times:\nCat 3 times:\nCat 3 times:\nCat 3 times:").correct
    assert not score_word_count("cat", 2, "category catalogue").correct


def test_launch_settings_are_named_and_applied() -> None:
    assert parse_param("rope_freq_scale=0.5") == ("rope_freq_scale", "0.5")
    params = SimpleNamespace(rope_freq_scale=0.0, n_batch=2048)
    apply_params(params, None, ["rope_freq_scale=0.5", "batch=64"])
    assert params.rope_freq_scale == 0.5 and params.n_batch == 64
    for wrong in ("rope_scale=0.5", "batch", "batch="):
        with pytest.raises(ValueError, match="NAME=VALUE"):
            parse_param(wrong)
    with pytest.raises(ValueError, match="expected one of on, off"):
        apply_params(SimpleNamespace(cache_prompt=True), None, ["prompt_cache=maybe"])
