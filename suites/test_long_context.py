"""Long-context tasks of several lengths (default 8K, 32K and 128K tokens; the published K3
regressions appear near 34K input tokens), generated in the manner of RULER: several keys
among distractor needles, variable tracking across the context, the most common words of a
long list, and multi-hop questions over a generated document, one kind in four items each.
Every item is scored exactly (the set of values named equals the set asked for). The items
come from a fixed seed and a versioned generator, so a baseline and a candidate see the
same text; 416 items at 8K, 104 at 32K and 128K (`ITEM_TOKENS`), for what a run can afford.

An accuracy suite: a wrong answer is a data point for the comparison with a baseline, not
a failed test; a test fails only when its answer cannot be scored. Logic:
`k3conformance/datasets/long_tasks.py`, `k3conformance/scoring/item_score.py`.
"""

from __future__ import annotations

import pytest

from k3conformance import ItemScore, Probe, ProbeResult, Settings, parametrize_probes
from k3conformance.checks.reasoning import check_answer_follows_reasoning
from k3conformance.datasets.long_tasks import GENERATOR, KINDS, LongTask, answer_pattern, long_tasks, tasks_sha256

MAX_TOKENS = 16384
SEED = "k3conformance-long-context-v2"
DATASET = f"generated long-context tasks ({GENERATOR}, seed {SEED})"
# The prompt tokens each length's items hold together: a length gets this over its length in
# items, within ITEM_BOUNDS, a multiple of the kinds (at the default lengths: 416 at 8K, 104 at
# 32K and 128K). The floor is the fewest items at which a candidate equal to the baseline can
# PASS at one sample per item (`k3conformance plan` at the default margin: 104): below it a
# length could only FAIL or be INCONCLUSIVE, and no strict run could exit 0. The cost grows
# with the tokens sent, and the simulator's main job sends and records them all
# (docs/suites.md gives the measured cost).
ITEM_TOKENS = 3_328_000
ITEM_BOUNDS = (104, 416)


def suite_for(tokens: int) -> str:
    return f"long_context_{tokens // 1000}k"


def items_for(tokens: int) -> int:
    low, high = ITEM_BOUNDS
    count = min(high, max(low, ITEM_TOKENS // tokens))
    return count - count % len(KINDS)


def _probe(tokens: int, task: LongTask, sha256: str) -> Probe:
    return Probe(
        suite_for(tokens),
        task.id,
        requests={"answer": {"messages": [{"role": "user", "content": task.prompt}], "stream": True}},
        max_tokens=MAX_TOKENS,
        kind=task.kind,
        data={
            "dataset": DATASET,
            "dataset_sha256": sha256,
            "answer": list(task.answers),
            "context_tokens": tokens,
            "estimated_tokens": task.estimated_tokens,
        },
    )


def _probes(settings: Settings) -> list[Probe]:
    probes: list[Probe] = []
    for tokens in settings.context_lengths:
        tasks = long_tasks(tokens, items_for(tokens), SEED)
        sha256 = tasks_sha256(tasks)
        probes.extend(_probe(tokens, task, sha256) for task in tasks)
    return probes


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parametrize_probes(metafunc, "test_long_context", _probes)


def test_long_context(probe: Probe, k3_result: ProbeResult, k3_score: ItemScore) -> None:
    expected = sorted(probe.data["answer"])
    pattern = answer_pattern(probe.kind)
    completions = k3_result.completions("answer")
    for completion in completions:
        named = sorted(set(pattern.findall(completion.content or "")))
        k3_score.add_completion(
            completion,
            float(named == expected),
            answered=bool(named),
            extracted=", ".join(named) if named else None,
            gold=", ".join(expected),
        )
    for completion in completions:
        check_answer_follows_reasoning(completion, f"stream, {probe.data['context_tokens']} tokens of context")
