"""The generated long-context tasks (datasets/long_tasks.py): the same items from the same
seed, answers that a reader computing from the prompt alone agrees with, kinds in equal
shares, lengths on target, and a scorer that takes no partial answer."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from k3conformance.datasets.long_tasks import GENERATOR, KINDS, answer_pattern, long_task, long_tasks, tasks_sha256
from k3conformance.reference.long_reader import read_long_task

SEED = "test-seed"


def test_the_same_seed_gives_the_same_items_and_another_seed_others() -> None:
    long_task.cache_clear()
    first = long_tasks(8000, 8, SEED)
    long_task.cache_clear()
    assert long_tasks(8000, 8, SEED) == first
    other = long_tasks(8000, 8, "another seed")
    assert all(a.prompt != b.prompt for a, b in zip(first, other, strict=True))
    assert len({task.id for task in first}) == 8


def test_kinds_take_turns_so_every_multiple_of_four_is_balanced() -> None:
    counts = Counter(task.kind for task in long_tasks(8000, 40, SEED))
    assert counts == dict.fromkeys(KINDS, 10)


@pytest.mark.parametrize("tokens", [8000, 32000])
def test_every_answer_is_what_a_reader_of_the_prompt_finds(tokens: int) -> None:
    """The reader (the simulator's) recomputes each answer from the text; its distractor has
    an answer's shape and is not one."""
    for task in long_tasks(tokens, 24 if tokens == 8000 else 8, SEED):
        read = read_long_task(task.prompt)
        assert read is not None and read.kind == task.kind, task.id
        assert read.answers == task.answers, task.id
        assert read.distractor not in task.answers and answer_pattern(task.kind).fullmatch(read.distractor)


def test_lengths_are_on_target_in_the_plugins_token_estimate() -> None:
    for tokens in (8000, 32000):
        for task in long_tasks(tokens, 4, SEED):
            assert 0.98 * tokens <= task.estimated_tokens <= tokens, (task.id, task.estimated_tokens)


def test_each_kind_asks_what_its_docstring_says() -> None:
    by_kind = {task.kind: task for task in long_tasks(8000, 4, SEED)}
    # Several needles a prompt, distractors among them: more numbers than asked for.
    multi_key = by_kind["multi_key"]
    assert len(re.findall(r"special magic numbers for \S+ is: \d{7}\.", multi_key.prompt)) > len(multi_key.answers)
    # Two chains: variables holding the value and variables that do not.
    tracking = by_kind["variable_tracking"]
    assert len(tracking.answers) >= 4 and len(re.findall(r"VAR [A-Z]{5} = ", tracking.prompt)) > len(tracking.answers)
    # The five common words appear 30 times each and no other word more than 3 times.
    words = Counter(re.findall(r"\d+\. ([a-z]+)", by_kind["common_words"].prompt))
    assert sorted(word for word, _ in words.most_common(5)) == list(by_kind["common_words"].answers)
    assert {words[word] for word in by_kind["common_words"].answers} == {30} and words.most_common(6)[5][1] <= 3
    # One postal code answers; the other provinces' codes are distractors.
    hop = by_kind["multi_hop"]
    assert len(hop.answers) == 1 and len(re.findall(r"has the postal code \d{5}\.", hop.prompt)) == 3


def test_the_answer_patterns_take_the_whole_set_and_nothing_else() -> None:
    """What the suite scores: the set of matches of the kind's pattern equals the answers."""
    for task in long_tasks(8000, 4, SEED):
        pattern = answer_pattern(task.kind)
        reply = f"Answer: {', '.join(task.answers)}."
        assert sorted(set(pattern.findall(reply))) == list(task.answers)
        assert sorted(set(pattern.findall(reply.replace(task.answers[0], "")))) != list(task.answers)


def test_a_prompt_without_a_generated_task_reads_as_none() -> None:
    assert read_long_task("What is the value of the key 'vault'? Answer with the value only.") is None
    assert read_long_task("") is None


def test_the_items_are_those_of_their_generator_version() -> None:
    """A change to the generator that changes any item must bump GENERATOR (the dataset's
    name in the run's identity, so a baseline of other items is told apart) and this hash."""
    assert GENERATOR == "ruler-style-v1"
    assert (
        tasks_sha256(long_tasks(2000, 4, "golden"))
        == "01d0b50b61f17a40b951372a1986d962470d1f48e57e1c3284e8c82c33b47966"
    )
