"""The HumanEval+ coding pool (fixtures/pools/humanevalplus, built by build_humanevalplus.py): it
loads offline with its provenance through `pool:NAME`, and on a sample its tasks hold what the
builder checked for all of them: the canonical solution passes every test in the plugin's own
sandbox, run as the coding suite runs it, and the simulator's wrong answer fails them."""

from __future__ import annotations

import json
from concurrent.futures import Future

import pytest
from run_files import REPO

from k3conformance.datasets.pools import load_pool
from k3conformance.datasets.suite_items import DatasetUnavailable, load_coding_dataset
from k3conformance.reference.answer_key import AnswerKey, default_fixtures_dir, wrong_code_answer
from k3conformance.sandbox import ExecutionResult, SandboxPool
from k3conformance.sandbox.split import task_program
from k3conformance.scoring.code_solutions import extract_code

POOL = "humanevalplus"
# A sample across what the tests compare: exact values (0), floats within a tolerance (2, 4),
# a root checked by its polynomial (32, whose released check the builder repairs), and a
# task whose expected outputs come from a reference function in the tests (14).
SAMPLE = ("HumanEvalPlus/0", "HumanEvalPlus/2", "HumanEvalPlus/4", "HumanEvalPlus/14", "HumanEvalPlus/32")


def _items() -> dict[str, dict[str, object]]:
    return {str(item["id"]): dict(item) for item in load_pool(POOL).items}


def test_the_coding_pool_loads_with_its_provenance() -> None:
    pool = load_pool(POOL)
    manifest = json.loads((REPO / "fixtures/pools" / POOL / "manifest.json").read_text())
    assert pool.suite == "coding" and pool.license == "Apache-2.0" and len(pool.items) == manifest["items"]
    assert 150 <= len(pool.items) <= 164 and len({item["id"] for item in pool.items}) == len(pool.items)
    (source,) = pool.provenance()["sources"]
    assert source["where"].startswith("github:evalplus/humanevalplus_release@") and source["license"] == "Apache-2.0"
    assert (REPO / manifest["builder"]).is_file()
    for item in pool.items:
        assert {"prompt", "entry_point", "test", "solution", "timeout_s"} <= set(item)
        assert "import numpy" not in item["test"] and "np." not in item["test"] and item["timeout_s"] >= 4.0


def test_a_coding_pool_spec_loads_as_a_coding_dataset() -> None:
    dataset = load_coding_dataset(f"pool:{POOL}", None)
    assert dataset.name == f"pool:{POOL}" and dataset.revision == load_pool(POOL).sha256
    assert dataset.items == load_pool(POOL).items
    with pytest.raises(DatasetUnavailable, match="feeds the math suite, not coding"):
        load_coding_dataset("pool:math_hard", None)


def test_on_a_sample_the_canonical_solution_passes_and_a_wrong_one_fails() -> None:
    items = _items()
    with SandboxPool(max_workers=2) as pool:
        runs: list[tuple[str, Future[ExecutionResult], Future[ExecutionResult]]] = [
            (
                name,
                pool.submit(task_program(items[name], str(items[name]["solution"])), seal=True),
                pool.submit(task_program(items[name], wrong_code_answer(str(items[name]["prompt"]))), seal=True),
            )
            for name in SAMPLE
        ]
        for name, right, wrong in runs:
            assert right.result().passed, (name, right.result().reason)
            assert not wrong.result().passed, name


def test_the_simulator_answers_a_pool_task_with_its_canonical_or_its_wrong_solution() -> None:
    """Keyed like HumanEval's answers: found by the prompt the suite sends; right is the pool's
    canonical solution (which the strong tests pass), wrong the `return None` body."""
    key = AnswerKey.load(default_fixtures_dir())
    item = _items()["HumanEvalPlus/32"]
    found = key.lookup(f"{item['prompt']}\n\nComplete the task in Python.")
    assert found is not None and found.suite == "coding" and found.id == "HumanEvalPlus/32"
    assert found.reply == f"```python\n{item['solution']}```"
    assert found.wrong_reply == f"```python\n{wrong_code_answer(str(item['prompt']))}```"
    assert extract_code(found.reply) is not None and extract_code(found.wrong_reply) is not None
