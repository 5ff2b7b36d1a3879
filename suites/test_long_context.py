"""Long-context retrieval: key-value needles hidden in filler of several lengths (default
8K, 32K and 128K tokens; the published K3 regressions appear near 34K input tokens), one
value asked for per prompt, scored by exact match per length. The prompts come from a
fixed seed, so a baseline and a candidate see the same text.

An accuracy suite: a wrong value is a data point for the comparison with a baseline, not
a failed test; a test fails only when its answer cannot be scored. Logic:
`k3conformance/datasets/long_prompts.py`, `k3conformance/scoring/item_score.py`.
"""

from __future__ import annotations

import re

import pytest

from k3conformance import ItemScore, Probe, ProbeResult, Settings, parametrize_probes
from k3conformance.checks.reasoning import check_answer_follows_reasoning
from k3conformance.datasets.long_prompts import needle_haystack, retrieval_question

NEEDLES = 4
PROMPTS_PER_LENGTH = 6
MAX_TOKENS = 16384
SEED = "k3conformance-long-context-v1"
_HEX_VALUE = re.compile(r"\b[0-9a-f]{6}\b")


def suite_for(tokens: int) -> str:
    return f"long_context_{tokens // 1000}k"


def _probe(tokens: int, index: int) -> Probe:
    document, pairs = needle_haystack(tokens=tokens, seed=f"{SEED}-{tokens}-{index}", needles=NEEDLES)
    key = list(pairs)[index % NEEDLES]
    prompt = f"{document}\n\n{retrieval_question(key)}"
    return Probe(
        suite_for(tokens),
        f"{tokens // 1000}k-{index}",
        requests={"answer": {"messages": [{"role": "user", "content": prompt}], "stream": True}},
        max_tokens=MAX_TOKENS,
        data={"dataset": f"synthetic needles ({SEED})", "answer": pairs[key], "context_tokens": tokens},
    )


def _probes(settings: Settings) -> list[Probe]:
    return [_probe(tokens, index) for tokens in settings.context_lengths for index in range(PROMPTS_PER_LENGTH)]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parametrize_probes(metafunc, "test_retrieval", _probes)


def test_retrieval(probe: Probe, k3_result: ProbeResult, k3_score: ItemScore) -> None:
    expected = probe.data["answer"]
    completions = k3_result.completions("answer")
    for completion in completions:
        values = _HEX_VALUE.findall(completion.content or "")
        k3_score.add_completion(
            completion,
            float(bool(values) and values[-1] == expected),
            answered=bool(values),
            extracted=values[-1] if values else None,
            gold=expected,
        )
    for completion in completions:
        check_answer_follows_reasoning(completion, f"stream, {probe.data['context_tokens']} tokens of context")
