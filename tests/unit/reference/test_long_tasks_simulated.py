"""The reference deployment (a simulator) on the generated long-context tasks: it answers by
reading the prompt (reference/long_reader.py), right or wrong per item through its one
decision, `Simulator.solve_chance`; the context faults degrade the long prompts through their
context-length mechanisms, and the short ones not at all."""

from __future__ import annotations

import dataclasses
import random
from functools import cache

from run_files import REPO

from k3conformance.datasets.long_tasks import KINDS, LongTask, answer_pattern, long_task, long_tasks
from k3conformance.reference.answer_key import AnswerKey
from k3conformance.reference.faults import gibberish
from k3conformance.reference.long_reader import read_long_task
from k3conformance.reference.profiles import get_profile
from k3conformance.reference.simulator import Simulator
from k3conformance.reference.values import SimulatedTurn
from k3conformance.scoring.repetition import detect

MODEL = "kimi-k3-simulator"
SEED = "test-simulated"


@cache
def simulator(profile: str) -> Simulator:
    return Simulator(get_profile(profile), AnswerKey.load(REPO / "fixtures"), MODEL)


def ask(profile: str, prompt: str, seed: int = 1) -> SimulatedTurn:
    body = {"messages": [{"role": "user", "content": prompt}], "seed": seed, "max_tokens": 16384}
    return simulator(profile).complete(body)


def named(task: LongTask, turn: SimulatedTurn) -> tuple[str, ...]:
    return tuple(sorted(set(answer_pattern(task.kind).findall(turn.content or ""))))


def test_tp8_answers_every_kind_right_at_about_its_accuracy_and_in_the_kinds_shape_when_wrong() -> None:
    tasks = long_tasks(8000, 48, SEED)
    replies = [named(task, ask("tp8", task.prompt)) for task in tasks]
    right = [reply == task.answers for reply, task in zip(replies, tasks, strict=True)]
    # tp8's accuracy is 0.9 (the share at this seed: measured, within the binomial spread of 48 items).
    assert 0.75 <= sum(right) / len(right) <= 0.99
    # A miss still answers, in the kind's shape: one value swapped for a distractor.
    assert all(replies)
    assert {task.kind for task, correct in zip(tasks, right, strict=True) if correct} == set(KINDS)


def with_accuracy(accuracy: float) -> Simulator:
    tp8 = simulator("tp8")
    return Simulator(dataclasses.replace(tp8.profile, accuracy=accuracy), tp8.answer_key, MODEL)


def test_the_answer_is_read_from_the_prompt() -> None:
    """Editing the facts in the prompt changes the answer: nothing comes from the generator.
    (At accuracy 1 every item's chance is 1, so the reader's answer is the reply.)"""
    always = with_accuracy(1.0)
    for task in long_tasks(8000, 4, SEED):
        body = {"messages": [{"role": "user", "content": task.prompt}], "seed": 1, "max_tokens": 16384}
        assert named(task, always.complete(body)) == task.answers
        if task.kind == "multi_hop":
            (code,) = task.answers
            body["messages"] = [{"role": "user", "content": task.prompt.replace(f"code {code}.", "code 13579.")}]
            assert named(task, always.complete(body)) == ("13579",)
        if task.kind == "multi_key":
            first = task.answers[0]
            body["messages"] = [{"role": "user", "content": task.prompt.replace(f"is: {first}.", "is: 1234567.")}]
            assert named(task, always.complete(body)) == tuple(sorted({"1234567", *task.answers[1:]}))


def test_right_or_wrong_is_the_items_own_solve_chance_for_every_seed() -> None:
    """Stable difficulty: an item whose chance is near 1 is right at every seed, one whose
    chance is low is wrong at most; at accuracy 0 every item misses."""
    tp8 = simulator("tp8")
    tasks = long_tasks(8000, 40, SEED)
    chances = []
    for task in tasks:
        read = read_long_task(task.prompt)
        assert read is not None
        chances.append(tp8.solve_chance(read.key, tp8.profile.accuracy))
    easy = tasks[max(range(len(tasks)), key=chances.__getitem__)]
    hard = tasks[min(range(len(tasks)), key=chances.__getitem__)]
    assert max(chances) > 0.99 and min(chances) < 0.6
    seeds = range(12)
    assert all(named(easy, ask("tp8", easy.prompt, seed)) == easy.answers for seed in seeds)
    hard_right = sum(named(hard, ask("tp8", hard.prompt, seed)) == hard.answers for seed in seeds)
    assert hard_right <= 9
    never = with_accuracy(0.0)
    body = {"messages": [{"role": "user", "content": easy.prompt}], "seed": 1, "max_tokens": 16384}
    assert named(easy, never.complete(body)) != easy.answers


def test_dcp_drift_spares_8k_and_garbles_every_128k_answer() -> None:
    short = long_task(8000, 0, SEED)
    assert ask("dcp-context-drift", short.prompt) == ask("tp8", short.prompt)
    for index in range(2):
        task = long_task(128000, index, SEED)
        turn = ask("dcp-context-drift", task.prompt)
        assert named(task, turn) != task.answers and not detect(turn.reasoning + " " + (turn.content or "")).looping


def test_no_gibberish_word_reads_as_a_long_context_answer() -> None:
    """Garbled text (reference/faults.py: words of two or three pieces) holds nothing of an answer's shape."""
    garbled = gibberish(random.Random(0), 50_000)
    for kind in KINDS:
        assert not answer_pattern(kind).search(garbled), kind


def test_megamoe_loops_on_a_128k_prompt_and_answers_8k_as_tp8() -> None:
    short = long_task(8000, 1, SEED)
    assert named(short, ask("ep32-megamoe", short.prompt)) == named(short, ask("tp8", short.prompt))
    task = long_task(128000, 1, SEED)
    turn = ask("ep32-megamoe", task.prompt)
    assert turn.finish_reason == "length" and detect(turn.reasoning).looping and named(task, turn) != task.answers
