"""Small model: generated questions with one verifiable answer (sums, differences, products,
comparisons, "what comes after") and long runs of numbers (counting, multiples), sized for a
real model of 135M parameters (SmolLM2-135M-Instruct on llama.cpp), which gets about half of
them right. The suite exists to show the gate on a real engine: a real numeric change in
llama.cpp flips real items and makes real loops (docs/real-engine.md).

Why not the math suite: its prompt asks for step-by-step reasoning and a `\\boxed{}` answer,
which SmolLM2-135M never writes (0 of 10 boxed in a probe); here the questions are asked
plainly, and short answers are scored by the math suite's last-number extraction (GSM8K's
flexible match), long ones on the whole run of numbers. An accuracy suite: a wrong answer is
a data point for the gate, not a failed test.

Logic: `k3conformance/datasets/small_model_items.py` (the generator and its seed),
`k3conformance/scoring/long_answers.py`.
"""

from __future__ import annotations

import pytest

from k3conformance import ItemScore, Probe, ProbeResult, Settings, parametrize_probes
from k3conformance.datasets.small_model_items import (
    GENERATOR_SEED,
    LONG_RULES,
    SmallModelItem,
    generate_items,
    items_digest,
)
from k3conformance.scoring.long_answers import score_long_answer
from k3conformance.scoring.math_answers import score_gsm8k

SUITE = "small_model"
# A short answer is a sentence at most; the longest expected answer (a run of 31 numbers)
# is about 95 tokens, and the room beyond it is where a run that does not stop shows.
SHORT_MAX_TOKENS = 48
LONG_MAX_TOKENS = 160


def _probe(item: SmallModelItem, digest: str) -> Probe:
    return Probe(
        SUITE,
        item.id,
        requests={"answer": {"messages": [{"role": "user", "content": item.prompt}]}},
        max_tokens=LONG_MAX_TOKENS if item.long else SHORT_MAX_TOKENS,
        kind=item.kind,
        data={
            "answer": item.answer,
            "rule": LONG_RULES.get(item.kind, "last-number"),
            "generator_seed": GENERATOR_SEED,
            "items_sha256": digest,
        },
    )


def _probes(settings: Settings) -> list[Probe]:
    items = generate_items(GENERATOR_SEED)
    digest = items_digest(items)
    return [_probe(item, digest) for item in items]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parametrize_probes(metafunc, "test_small_model_answer", _probes)


def test_small_model_answer(probe: Probe, k3_result: ProbeResult, k3_score: ItemScore) -> None:
    gold, rule = probe.data["answer"], probe.data["rule"]
    for completion in k3_result.completions("answer"):
        if rule == "last-number":
            flexible = score_gsm8k(gold, completion.content)["flexible"]
            k3_score.add_completion(
                completion,
                float(flexible.correct),
                answered=flexible.extracted is not None,
                extracted=flexible.extracted,
                gold=gold,
            )
        else:
            long = score_long_answer(rule, gold, completion.content)
            k3_score.add_completion(
                completion, float(long.correct), answered=long.given > 0, given=long.given, gold=gold
            )
