"""What a real-repository task's sandboxed test run costs (issue 33): the hidden tests' verdict
on the reference solution of the first task of every project of the pool, run N times one
after another, with the median and 95th percentile of the wall time per project and overall.

    python benchmarks/bench_pool_verdict.py [--runs 5]

Each run is a whole verdict as the suite scores a task: a bubblewrap start, the trusted
process, the model's process importing the project, and every deciding test through the
boundary.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from tabulate import tabulate

from k3conformance.agent.pool_tasks import load_pool_tasks
from k3conformance.agent.tools import Workspace
from k3conformance.sandbox import SandboxPool


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    arguments = parser.parse_args()
    _, tasks = load_pool_tasks()
    first = {}
    for entry in tasks:
        first.setdefault(entry.project, entry.task)
    pool = SandboxPool(1)
    rows, every = [], []
    for project, task in first.items():
        seconds = []
        for _ in range(arguments.runs):
            started = time.monotonic()
            outcome = asyncio.run(Workspace(dict(task.solution), pool).hidden_tests(task.hidden, task.hidden_ids))
            seconds.append(time.monotonic() - started)
            assert outcome.passed, outcome.reason
        every += seconds
        rows.append([project, len(task.hidden_ids), statistics.median(seconds), p95(seconds)])
    rows.append(["all", "", statistics.median(every), p95(every)])
    print(tabulate(rows, headers=["project", "deciding tests", "median s", "p95 s"], floatfmt=".2f"))


if __name__ == "__main__":
    main()
