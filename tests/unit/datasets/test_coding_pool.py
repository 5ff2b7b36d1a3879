"""The EvalPlus coding pools, HumanEval+ (fixtures/pools/humanevalplus, built by
build_humanevalplus.py) and MBPP+ (fixtures/pools/mbppplus, build_mbppplus.py): each loads offline with its provenance through `pool:NAME`, and on a sample its tasks hold what the
builder checked for all of them: the canonical solution passes every test in the plugin's own
sandbox, run as the coding suite runs it, and the simulator's wrong answer fails them."""

from __future__ import annotations

import json
from concurrent.futures import Future

import pytest
from run_files import REPO

from k3conformance.datasets.pools import load_pool
from k3conformance.datasets.suite_items import DatasetUnavailable, load_coding_dataset
from k3conformance.reference.answer_key import AnswerKey, default_fixtures_dir, wrong_code_answer, wrong_solution
from k3conformance.sandbox import ExecutionResult, SandboxPool
from k3conformance.sandbox.split import task_program
from k3conformance.scoring.code_solutions import extract_code

POOL = "humanevalplus"
# Per pool: the problems released, its sources' repository, and a sample across what the tests
# compare. HumanEval+: exact values (0), floats within a tolerance (2, 4), a root checked by its
# polynomial (32, whose released check the builder repairs), and a task whose expected outputs
# come from a reference function in the tests (14). MBPP+: exact values (3), sets (2), floats
# within a tolerance (82), expected outputs from a reference function (630), and a match-or-None
# answer whose comparison the builder asserts (737).
POOLS = {
    "humanevalplus": (164, "evalplus/humanevalplus_release", ("0", "2", "4", "14", "32")),
    "mbppplus": (378, "evalplus/mbppplus_release", ("2", "3", "82", "630", "737")),
}
PREFIX = {"humanevalplus": "HumanEvalPlus", "mbppplus": "MbppPlus"}


def _items(pool: str = POOL) -> dict[str, dict[str, object]]:
    return {str(item["id"]): dict(item) for item in load_pool(pool).items}


@pytest.mark.parametrize("name", sorted(POOLS))
def test_the_coding_pool_loads_with_its_provenance(name: str) -> None:
    released, repository, _ = POOLS[name]
    pool = load_pool(name)
    manifest = json.loads((REPO / "fixtures/pools" / name / "manifest.json").read_text())
    assert pool.suite == "coding" and pool.license == "Apache-2.0" and len(pool.items) == manifest["items"]
    assert 0.9 * released <= len(pool.items) <= released and len({item["id"] for item in pool.items}) == len(pool.items)
    sources = pool.provenance()["sources"]
    assert sources and all(source["where"].startswith(f"github:{repository}@") for source in sources)
    assert all(source["license"] == "Apache-2.0" for source in sources)
    assert (REPO / manifest["builder"]).is_file()
    for item in pool.items:
        assert str(item["id"]).startswith(f"{PREFIX[name]}/")
        assert {"prompt", "entry_point", "test", "solution", "timeout_s"} <= set(item)
        assert "import numpy" not in item["test"] and "np." not in item["test"] and item["timeout_s"] >= 4.0
        assert "def check(candidate)" in item["test"] and str(item["entry_point"]) in str(item["prompt"])


@pytest.mark.parametrize("name", sorted(POOLS))
def test_a_coding_pool_spec_loads_as_a_coding_dataset(name: str) -> None:
    dataset = load_coding_dataset(f"pool:{name}", None)
    assert dataset.name == f"pool:{name}" and dataset.revision == load_pool(name).sha256
    assert dataset.items == load_pool(name).items
    with pytest.raises(DatasetUnavailable, match="feeds the math suite, not coding"):
        load_coding_dataset("pool:math_hard", None)


@pytest.mark.parametrize("name", sorted(POOLS))
def test_on_a_sample_the_canonical_solution_passes_and_a_wrong_one_fails(name: str) -> None:
    items = _items(name)
    with SandboxPool(max_workers=2) as pool:
        runs: list[tuple[str, Future[ExecutionResult], Future[ExecutionResult]]] = [
            (
                name,
                pool.submit(task_program(items[task], str(items[task]["solution"])), seal=True),
                pool.submit(task_program(items[task], wrong_solution(items[task])), seal=True),
            )
            for task in (f"{PREFIX[name]}/{number}" for number in POOLS[name][2])
        ]
        for task, right, wrong in runs:
            assert right.result().passed, (task, right.result().reason)
            assert not wrong.result().passed, task
            # A wrong answer fails on what it returns, not on how it is written or on a limit.
            assert "SyntaxError" not in wrong.result().reason and "IndentationError" not in wrong.result().reason
            assert "killed" not in wrong.result().reason and "Boundary" not in wrong.result().reason, task


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


def test_the_simulator_answers_an_mbpp_task_with_its_solution_or_that_solution_returning_none() -> None:
    """MBPP's prompt only describes the function (and shows one call): the wrong answer keeps
    the canonical solution's signature and returns None, so the tests call it and fail an assert."""
    key = AnswerKey.load(default_fixtures_dir())
    item = _items("mbppplus")["MbppPlus/2"]
    found = key.lookup(f"{item['prompt']}\n\nComplete the task in Python.")
    assert found is not None and found.suite == "coding" and found.id == "MbppPlus/2"
    assert found.reply == f"```python\n{item['solution']}```"
    wrong = wrong_solution(item)
    assert found.wrong_reply == f"```python\n{wrong}```"
    assert wrong == "\ndef similar_elements(test_tup1, test_tup2):\n  return None\n"
    assert wrong_solution({"prompt": "", "entry_point": "f", "solution": "import re\ndef f(x): return x\n"}) == (
        "import re\ndef f(x):\n    return None\n"
    )
