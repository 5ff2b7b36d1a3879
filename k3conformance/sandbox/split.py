"""Programs split across the process boundary (issue 25): a solution in the model's process,
its tests in the trusted one (`boundary.py`). The coding suite's items run this way; the
agent's hidden tests have their own runner (agent/verdict.py) on the same boundary.

The tests see the solution's top-level names as handles (its functions, its helpers such as
HumanEval's `encode_cyclic`, its imports) and call them through the boundary; a failing
assert is the trusted process's own traceback, so the run's reason reads as it did when
both ran in one process.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from k3conformance.sandbox.boundary import CALL_TIMEOUT_S, boundary_prelude
from k3conformance.scoring.code_solutions import humaneval_parts

# T's part of a split program: start M, run the solution there, bind each of its top-level
# names here as a handle, then run the tests here. M's output goes to T's stderr first, so
# a failed test's traceback is still the last thing there (the run's reason).
_SPLIT_RUNNER = r"""
import builtins, linecache, sys, traceback

ARGUMENTS = json.loads(%r)
linecache.cache["tests.py"] = (len(ARGUMENTS["tests"]), None, ARGUMENTS["tests"].splitlines(True), "tests.py")
model = k3_boundary.ModelProcess("", ARGUMENTS["timeout"])
failure = None
try:
    solution = model.end.request("exec", ARGUMENTS["solution"], "solution.py")
    namespace = {"__name__": "__k3_tests__", "__builtins__": builtins}
    for name in model.end.request("op", "names", solution):
        if isinstance(name, str) and name.isidentifier():
            namespace[name] = getattr(solution, name)
    exec(compile(ARGUMENTS["tests"], "tests.py", "exec"), namespace)
except BaseException as error:
    failure = error
printed = model.close()
if printed:
    sys.stderr.write("--- the model's process printed ---\\n" + printed + "\\n")
if failure is not None:
    # Printed here, not by the interpreter's own hook, which reads source lines from files
    # (the tests' lines are in linecache only).
    traceback.print_exception(failure)
    sys.stderr.flush()
    raise SystemExit(1)
"""


def split_program(solution: str, tests: str, *, timeout_s: float = CALL_TIMEOUT_S) -> str:
    """A program (to run sealed) whose `tests` run in a process that never runs `solution`:
    the solution's top-level names are handles to the model's process there, and each call
    across waits at most `timeout_s`."""
    arguments = {"solution": solution, "tests": tests, "timeout": timeout_s}
    return "import json\n" + boundary_prelude() + _SPLIT_RUNNER % json.dumps(arguments)


def task_program(task: Mapping[str, Any], code: str) -> str:
    """The split program that checks `code` against a coding suite's task: HumanEval-style
    (`test` + `entry_point`, scoring/code_solutions.py) or plain asserts (`tests`). A pool's
    task may set the limit of each call across the boundary (`timeout_s`: EvalPlus's per-test
    limit, fixtures/pools/build_humanevalplus.py)."""
    timeout_s = float(task.get("timeout_s", CALL_TIMEOUT_S))
    if "test" in task:
        return split_program(*humaneval_parts(task, code), timeout_s=timeout_s)
    return split_program(code, str(task["tests"]), timeout_s=timeout_s)
