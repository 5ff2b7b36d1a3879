"""The reference deployment's accuracy profiles (a simulator): the published EP32 results of
sglang issue 40751, which only the gate's comparison with a tp8 baseline can catch."""

from __future__ import annotations

from functools import cache

import pytest
from run_files import REPO

from k3conformance.reference.answer_key import AnswerKey
from k3conformance.reference.faults import LONG_OUTPUT_SUITES
from k3conformance.reference.profiles import get_profile, profiles_of_kind
from k3conformance.reference.simulator import Simulator
from k3conformance.reference.values import Completion, FixtureItem
from k3conformance.scoring.repetition import detect

MODEL = "kimi-k3-simulator"
SEEDS = (1234, 1235)


@cache
def answer_key() -> AnswerKey:
    return AnswerKey.load(REPO / "fixtures")


def simulator(profile: str) -> Simulator:
    return Simulator(get_profile(profile), answer_key(), MODEL)


def items(suites: frozenset[str]) -> list[FixtureItem]:
    return [item for item in answer_key().items if item.suite in suites and item.graded]


def ask(profile: str, item: FixtureItem, seed: int, max_tokens: int = 4096) -> Completion:
    body = {"messages": [{"role": "user", "content": item.prompt}], "seed": seed, "max_tokens": max_tokens}
    return simulator(profile).complete(body)


def share(predicate: list[bool]) -> float:
    return sum(predicate) / len(predicate)


def test_the_accuracy_profiles() -> None:
    assert profiles_of_kind("accuracy") == ["ep32-deepep", "ep32-megamoe"]


@pytest.mark.parametrize("profile", ["ep32-deepep", "ep32-megamoe"])
def test_correct_answers_are_a_subset_of_tp8s(profile: str) -> None:
    """Draws depend only on (item, seed): a pair of runs differs by the layout's loss alone."""
    for item in items(LONG_OUTPUT_SUITES | {"math"}):
        for seed in SEEDS:
            if simulator(profile).answers_correctly(item, seed):
                assert simulator("tp8").answers_correctly(item, seed), item.id


def test_megamoe_loops_on_about_half_of_the_long_outputs_and_loses_about_26_points() -> None:
    coding = items(LONG_OUTPUT_SUITES)
    pairs = [(item, seed) for item in coding for seed in SEEDS]
    tp8 = share([simulator("tp8").answers_correctly(item, seed) for item, seed in pairs])
    megamoe = share([simulator("ep32-megamoe").answers_correctly(item, seed) for item, seed in pairs])
    looping = share([ask("ep32-megamoe", item, seed).finish_reason == "length" for item, seed in pairs])
    assert 0.62 <= tp8 <= 0.74 and 0.20 <= tp8 - megamoe <= 0.32
    assert 0.42 <= looping <= 0.58


def test_a_megamoe_loop_starts_healthy_and_runs_to_the_token_limit() -> None:
    looping = next(
        completion
        for item in items(LONG_OUTPUT_SUITES)
        if (completion := ask("ep32-megamoe", item, SEEDS[0], max_tokens=3000)).finish_reason == "length"
    )
    assert looping.content == "" and looping.completion_tokens == 3000
    assert looping.reasoning.startswith("The user asks:")
    report = detect(looping.reasoning)
    assert report.looping and report.loop_repeats > 100


def test_megamoe_math_and_deepep_do_not_loop() -> None:
    for profile, suites in (("ep32-megamoe", frozenset({"math"})), ("ep32-deepep", LONG_OUTPUT_SUITES)):
        for item in items(suites)[:20]:
            completion = ask(profile, item, SEEDS[0])
            assert completion.finish_reason == "stop" and not detect(completion.reasoning).looping


def test_megamoe_math_answers_like_tp8() -> None:
    for item in items(frozenset({"math"})):
        assert ask("ep32-megamoe", item, SEEDS[0]) == ask("tp8", item, SEEDS[0])
