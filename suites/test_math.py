"""Math: problems answered in `\\boxed{}`, scored with math-verify (gold first) and a sympy
fallback; GSM8K also gets lm-evaluation-harness's strict and flexible extraction. Large
generation budgets (65,536 tokens by default at effort max): the regressions that matter
show up only in long outputs, and a truncated answer is recorded as truncated.

An accuracy suite: a wrong answer is a data point for the comparison with a baseline, not
a failed test; a test fails only when its answer cannot be scored (a parser or API fault).
Logic: `k3conformance/scoring/math_answers.py`, `k3conformance/scoring/item_score.py`.
"""

from __future__ import annotations

from typing import Any

import pytest

from k3conformance import ItemScore, Probe, ProbeResult, Settings, parametrize_probes
from k3conformance.checks.reasoning import check_answer_follows_reasoning
from k3conformance.datasets.sources import LoadedDataset
from k3conformance.datasets.suite_items import load_math_items, math_item_id
from k3conformance.scoring.math_answers import score_gsm8k, score_math

SUITE = "math"
MAX_TOKENS = 65536
PROMPT = "{problem}\n\nReason step by step, and put your final answer within \\boxed{{}}."


def _probe(dataset: LoadedDataset, item: dict[str, Any]) -> Probe:
    return Probe(
        SUITE,
        math_item_id(dataset.name, item),
        requests={
            "answer": {"messages": [{"role": "user", "content": PROMPT.format(problem=item["prompt"])}], "stream": True}
        },
        max_tokens=MAX_TOKENS,
        data={
            "dataset": dataset.name,
            "dataset_sha256": dataset.revision,
            "answer": str(item["answer"]),
            "gsm8k": "gsm8k" in dataset.name,
        },
    )


def _probes(settings: Settings) -> list[Probe]:
    return [_probe(dataset, item) for dataset in load_math_items(settings) for item in dataset.items]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parametrize_probes(metafunc, "test_math_answer", _probes)


def test_math_answer(probe: Probe, k3_result: ProbeResult, k3_score: ItemScore) -> None:
    gold = probe.data["answer"]
    completions = k3_result.completions("answer")
    for completion in completions:
        result = score_math(gold, completion.content)
        extra: dict[str, Any] = {}
        if probe.data["gsm8k"]:
            extra = {f"gsm8k_{name}": score.correct for name, score in score_gsm8k(gold, completion.content).items()}
        k3_score.add_completion(
            completion,
            float(result.correct),
            answered=result.extracted is not None,
            extracted=result.extracted,
            method=result.method,
            gold=gold,
            **extra,
        )
    for completion in completions:
        check_answer_follows_reasoning(completion, "stream")
