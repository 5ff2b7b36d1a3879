"""How soon a conformance failure reaches the screen: seconds from launching pytest to its header,
to the end of collection and to the first `k3conformance: FAILED` line, read from pytest's output
as it comes (no timed assertion anywhere: the figures go to docs/release-view.md).

    python benchmarks/bench_first_failure.py [--profile empty-tool-calls] [--runs 3] [-- PYTEST ARGS]

The run is stopped at the first failure line; its records go to a temporary folder.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
MILESTONES = {"header": "k3conformance: endpoint ", "collected": "collected ", "first failure": "k3conformance: FAILED"}


def one_run(profile: str, extra: list[str]) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="k3-first-failure-") as results:
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            f"--k3-endpoint=reference:{profile}",
            f"--k3-results-dir={results}",
            *extra,
        ]
        start = time.monotonic()
        process = subprocess.Popen(
            command, cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        )
        seen: dict[str, float] = {}
        assert process.stdout is not None
        for line in process.stdout:
            for name, marker in MILESTONES.items():
                if name not in seen and line.startswith(marker):
                    seen[name] = time.monotonic() - start
            if "first failure" in seen:
                break
        process.kill()
        process.wait()
        return seen


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--profile", default="empty-tool-calls")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("pytest_args", nargs="*")
    arguments = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}; reference:{arguments.profile}; {arguments.runs} runs")
    runs = [one_run(arguments.profile, arguments.pytest_args) for _ in range(arguments.runs)]
    for name in MILESTONES:
        times = [run[name] for run in runs if name in run]
        shown = ", ".join(f"{value:.1f}" for value in times)
        median = f"median {statistics.median(times):.1f} s" if times else "never seen"
        print(f"{name}: {median} ({shown})")
    print(f"load average after {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
