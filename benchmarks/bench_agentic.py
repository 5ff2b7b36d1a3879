"""What one agentic coding task costs on the reference deployment (a simulator): the suite
run as a child pytest against a profile, then per task from its records: turns (requests),
sandboxed tool calls, prompt and output tokens, and the suite's wall time per task; then
the means per task kind, with the share solved, looping and stopped by truncation.

    python benchmarks/bench_agentic.py                        # tp8, all 60 tasks
    python benchmarks/bench_agentic.py --profile ep32-megamoe --limit 20

The wall time includes pytest's start-up and the reference deployment's; tasks run side by
side (requests up to --k3-concurrency, sandbox runs one per CPU).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tabulate import tabulate

from k3conformance.runs.records import iter_records

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="tp8")
    parser.add_argument("--limit", type=int, default=None)
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as results:
        command = [
            sys.executable, "-m", "pytest", str(REPO / "suites" / "test_agentic_coding.py"), "-q", "-p",
            "no:cacheprovider", f"--k3-endpoint=reference:{arguments.profile}", f"--k3-results-dir={results}",
        ]  # fmt: skip
        if arguments.limit:
            command.append(f"--k3-limit={arguments.limit}")
        started = time.monotonic()
        subprocess.run(command, check=False, capture_output=True, cwd=REPO)
        seconds = time.monotonic() - started
        (run_dir,) = Path(results).glob("*/*")
        agents = [
            record["score"]["details"][0]["agent"]
            for record in iter_records(run_dir, "outcome")
            if record["test"] == "test_task_solved" and record["score"]
        ]
    per_task = {
        "turns (requests)": [len(agent["turns"]) for agent in agents],
        "sandboxed tool calls (+1 hidden test run)": [
            sum(count for name, count in agent["tool_calls"].items() if name != "finish") for agent in agents
        ],
        "prompt tokens, all turns": [sum(turn["prompt_tokens"] for turn in agent["turns"]) for agent in agents],
        "output tokens, all turns": [agent["output_tokens"] for agent in agents],
        "largest context": [agent["largest_context"] for agent in agents],
    }
    rows = [[name, statistics.mean(values), min(values), max(values)] for name, values in per_task.items()]
    print(
        f"profile {arguments.profile}: {len(agents)} tasks in {seconds:.1f} s, {seconds / len(agents):.2f} s per task"
    )
    print(tabulate(rows, headers=["per task", "mean", "min", "max"], floatfmt=".1f"))
    print()
    print(tabulate(_by_kind(agents), headers=KIND_HEADERS, disable_numparse=True))


KIND_HEADERS = ["kind", "tasks", "turns", "output tokens", "largest context", "solved", "looping", "truncated"]


def _by_kind(agents: list[dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for kind in sorted({agent["kind"] for agent in agents}):
        of_kind = [agent for agent in agents if agent["kind"] == kind]
        rows.append(
            [
                kind,
                len(of_kind),
                f"{statistics.mean(len(agent['turns']) for agent in of_kind):.1f}",
                f"{statistics.mean(agent['output_tokens'] for agent in of_kind):,.0f}",
                f"{statistics.mean(agent['largest_context'] for agent in of_kind):,.0f}",
                *(
                    f"{sum(bool(agent[flag]) for agent in of_kind)}/{len(of_kind)}"
                    for flag in ("solved", "looping", "truncated")
                ),
            ]
        )
    return rows


if __name__ == "__main__":
    main()
