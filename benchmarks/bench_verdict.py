"""What the split verdict costs (issue 25): each agentic task's hidden tests against its
reference solution, run in one process (the `run_tests` runner, as the verdict ran before)
and split across the process boundary (agent/verdict.py, as it runs now), alternating, one
at a time; the median and the spread of each, per run.

    python benchmarks/bench_verdict.py              # the first 20 tasks, 3 rounds
    python benchmarks/bench_verdict.py --tasks 60 --rounds 5

Every split run of a reference solution must be solved: a failure means the boundary, not
the speed, is wrong, and the script says so.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time

from tabulate import tabulate

from k3conformance.agent.tasks import HIDDEN_DIR, load_tasks
from k3conformance.agent.tools import Workspace, hidden_test_ids, judge_hidden
from k3conformance.sandbox import SandboxPool


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    arguments = parser.parse_args()
    tasks = load_tasks().tasks[: arguments.tasks]
    times: dict[str, list[float]] = {"one process": [], "split": []}
    failures = 0
    with SandboxPool(1) as pool:
        for _ in range(arguments.rounds):
            for task in tasks:
                workspace = Workspace(dict(task.solution), pool)
                started = time.perf_counter()
                # The in-process runner over the hidden tests, as Workspace.hidden_tests ran it before.
                files = {**task.solution, **task.hidden}
                execution = asyncio.run(workspace._run("run_tests", {"directory": HIDDEN_DIR}, files))
                times["one process"].append(time.perf_counter() - started)
                failures += not judge_hidden(execution, hidden_test_ids(task.hidden)).passed
                started = time.perf_counter()
                failures += not asyncio.run(workspace.hidden_tests(task.hidden)).passed
                times["split"].append(time.perf_counter() - started)
    print(f"{len(tasks)} tasks x {arguments.rounds} rounds; {os.cpu_count()} CPUs; load {os.getloadavg()[0]:.1f}")
    rows = [
        [kind, f"{1000 * statistics.median(values):.0f}", f"{1000 * min(values):.0f}", f"{1000 * max(values):.0f}"]
        for kind, values in times.items()
    ]
    print(tabulate(rows, headers=["hidden tests", "median ms", "min ms", "max ms"], tablefmt="github"))
    if failures:
        sys.exit(f"{failures} reference solutions were not solved: the figures mean nothing")


if __name__ == "__main__":
    main()
