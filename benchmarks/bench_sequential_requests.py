"""What the sequential gate saves end to end on the reference deployment (a simulator): requests
and output tokens of sequential runs of the `ep32-megamoe` candidate against a fixed-size run.

    python benchmarks/bench_sequential_requests.py [--runs 8] [--suite agentic_coding] [-- PYTEST ARGS]

Stores a `tp8` baseline in a temporary folder (as the README's demo does), runs the candidate
once with `--k3-sequential=off` and then `--runs` times sequentially: each run has its own run
id, so its own committed item order, and the stop falls where that order puts the looping
items. Every figure is counted from the runs' response records (`k3conformance.runs.spend`),
not timed; the whole run's requests are also set against the baseline's (with --k3-stop-on-fail, on by
default, a FAIL stops every suite's requests). "One at a time" is what the fixed-size run sent on the items the rule used: what a
run that sent nothing ahead of its tests would have spent. Extra arguments after `--` go to every pytest run (for example a list of suite
files, to measure on fewer suites).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from k3conformance.runs.records import iter_records
from k3conformance.runs.spend import Spend, spend_by_suite, total

REPO_ROOT = Path(__file__).resolve().parents[1]
CANDIDATE = "reference-ep32-megamoe"


def pytest_run(results: Path, *arguments: str) -> None:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--k3-results-dir={results}"]
    # Exit status 1 is the gate's FAIL, the expected verdict for this candidate.
    done = subprocess.run([*command, *arguments], cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(f"pytest {' '.join(arguments)} exited {done.returncode}:\n{done.stdout[-3000:]}")


def newest_run(results: Path, shape: str, known: set[Path]) -> Path:
    (run_dir,) = (path for path in (results / shape).iterdir() if path.is_dir() and path not in known)
    return run_dir


def share(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "n/a"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--suite", default="agentic_coding", help="the suite whose saving is reported per run")
    parser.add_argument("pytest_args", nargs="*")
    arguments = parser.parse_args()
    extra = arguments.pytest_args
    suite = arguments.suite
    with tempfile.TemporaryDirectory(prefix="k3-sequential-") as folder:
        results = Path(folder)
        pytest_run(results, "--k3-endpoint", "reference:tp8", "--k3-shape", "tp8", "--k3-save-baseline", *extra)
        baseline_all = total(spend_by_suite(newest_run(results, "tp8", set())))
        print(
            f"baseline (tp8, fixed size): {baseline_all.requests} requests, {baseline_all.output_tokens} output tokens"
        )
        candidate = ("--k3-endpoint", "reference:ep32-megamoe", "--k3-baseline", "tp8", *extra)
        pytest_run(results, *candidate, "--k3-sequential=off")
        fixed_dir = newest_run(results, CANDIDATE, set())
        fixed = spend_by_suite(fixed_dir)
        fixed_suite, fixed_all = fixed.get(suite, Spend()), total(fixed)
        print(
            f"fixed-size run: {suite} {fixed_suite.requests} requests, {fixed_suite.output_tokens} output tokens; "
            f"whole run {fixed_all.requests} requests, {fixed_all.output_tokens} output tokens"
        )
        fixed_by_item = Counter(r["item"] for r in iter_records(fixed_dir, "response") if r["suite"] == suite)
        print(
            f"| run | {suite} stopped | requests | one at a time | output tokens | whole run: requests "
            "| output tokens | whole run against the baseline's requests | left unjudged |"
        )
        print("|---|---|---|---|---|---|---|---|---|")
        known = {fixed_dir}
        request_shares: list[float] = []
        baseline_shares: list[float] = []
        for index in range(arguments.runs):
            pytest_run(results, *candidate)
            run_dir = newest_run(results, CANDIDATE, known)
            known.add(run_dir)
            spent = spend_by_suite(run_dir)
            mine, whole = spent.get(suite, Spend()), total(spent)
            gate = json.loads((run_dir / "gate.json").read_text())
            stop = ((gate.get("sequential") or {}).get(suite) or {}).get("stop")
            stopped = f"{stop['verdict']} by the {stop['by']} at item {stop['items']}" if stop else "no decision"
            # What a run sending one item at a time would have sent: the fixed-size run's requests
            # on the items the rule used. The rest of the gap is what ran ahead of the stop.
            order = json.loads((run_dir / "summary.json").read_text())["sequential"][suite]["order"]
            serial = sum(fixed_by_item[item] for item in order[: stop["items"] if stop else len(order)])
            request_shares.append(mine.requests / fixed_suite.requests if fixed_suite.requests else 0.0)
            baseline_shares.append(whole.requests / baseline_all.requests if baseline_all.requests else 0.0)
            paths = gate.get("sequential") or {}
            unjudged = ", ".join(name for name, path in sorted(paths.items()) if path.get("left_unjudged")) or "none"
            print(
                f"| {index + 1} | {stopped} | {mine.requests} ({share(mine.requests, fixed_suite.requests)}) "
                f"| {serial} ({share(serial, fixed_suite.requests)}) "
                f"| {mine.output_tokens} ({share(mine.output_tokens, fixed_suite.output_tokens)}) "
                f"| {whole.requests} ({share(whole.requests, fixed_all.requests)}) "
                f"| {whole.output_tokens} ({share(whole.output_tokens, fixed_all.output_tokens)}) "
                f"| {share(whole.requests, baseline_all.requests)} | {unjudged} |"
            )
        if request_shares:
            print(
                f"{suite} requests against the fixed-size run: median {statistics.median(request_shares):.1%}, "
                f"from {min(request_shares):.1%} to {max(request_shares):.1%}; "
                f"at most a quarter in {sum(s <= 0.25 for s in request_shares)} of {len(request_shares)} runs"
            )
            print(
                f"whole runs against the baseline's {baseline_all.requests} requests: median "
                f"{statistics.median(baseline_shares):.1%}, from {min(baseline_shares):.1%} to {max(baseline_shares):.1%}; "
                f"at most a quarter in {sum(s <= 0.25 for s in baseline_shares)} of {len(baseline_shares)} runs"
            )


if __name__ == "__main__":
    main()
