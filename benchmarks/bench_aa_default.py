"""Does an unchanged deployment PASS the default run? Ten A/A seeds on the reference deployment
(a simulator), gated in the strict default against a stored tp8 baseline.

    python benchmarks/bench_aa_default.py [--seeds 10] [--candidate PROFILE] [-- PYTEST ARGS]

Stores a `tp8` baseline in a temporary folder (as the README's demo does), then runs the same
profile once per seed with `--k3-seed N --k3-allow-differences seed --k3-baseline tp8`: the
candidate is the baseline's deployment with only its sampling seed changed, which issue 31 asks
to exit 0 in at least 8 of 10 seeds and to FAIL in none. Per seed it prints the exit status, the
gate's verdict and each suite's verdict from the run's gate.json; nothing is timed. Extra
arguments after `--` go to every pytest run (for example `--k3-samples 8`). `--candidate
numeric-drift` runs that profile instead of tp8 (every suite 6 points down, twice the default
margin), which issue 31 asks to FAIL at least 4 runs in 5. `--baseline-from DIR` gates against
the baseline an earlier `--keep DIR` stored, so a second candidate costs no second baseline.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]


def pytest_run(results: Path, *arguments: str) -> int:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--k3-results-dir={results}"]
    done = subprocess.run([*command, *arguments], cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    # Exit status 1 is a verdict other than PASS; anything else is a broken run, not a verdict.
    if done.returncode not in (0, 1):
        raise SystemExit(f"pytest {' '.join(arguments)} exited {done.returncode}:\n{done.stdout[-3000:]}")
    return done.returncode


def new_run(results: Path, shape: str, known: set[Path]) -> Path:
    (run_dir,) = (path for path in (results / shape).iterdir() if path.is_dir() and path not in known)
    return run_dir


# A fresh baseline's seed: far from the candidates' 1, 2, ... so no pair shares its draws.
BASELINE_SEED_OFFSET = 1000


def store_baseline(results: Path, extra: list[str], seed: int | None) -> None:
    seeded = ["--k3-seed", str(seed)] if seed is not None else []
    pytest_run(results, "--k3-endpoint", "reference:tp8", "--k3-shape", "tp8", "--k3-save-baseline", *seeded, *extra)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--candidate", default="tp8", help="the reference profile each seed runs (default: tp8)")
    parser.add_argument("--keep", type=Path, help="store the runs in this new folder, kept (default: a temporary one)")
    parser.add_argument(
        "--fresh-baselines",
        action="store_true",
        help="store a new baseline (seed 1000 + N) for each seed N: the runs are then independent replicates "
        "of the whole design; with one shared baseline its own sampling noise is in every one of them",
    )
    parser.add_argument(
        "--baseline-from",
        type=Path,
        help="gate against the tp8 baseline already stored in this folder (an earlier --keep) and add the runs "
        "there, instead of storing a new one: another candidate against the same baseline",
    )
    parser.add_argument("pytest_args", nargs="*")
    arguments = parser.parse_args()
    extra = arguments.pytest_args
    if arguments.baseline_from is not None and (arguments.keep is not None or arguments.fresh_baselines):
        parser.error("--baseline-from reuses one stored baseline: not with --keep or --fresh-baselines")
    if arguments.baseline_from is not None and not (arguments.baseline_from / "tp8").is_dir():
        parser.error(f"--baseline-from {arguments.baseline_from}: no tp8 baseline stored there")
    if arguments.keep is not None:
        arguments.keep.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="k3-aa-") as folder:
        root = arguments.baseline_from or arguments.keep or Path(folder)
        if arguments.baseline_from is None and not arguments.fresh_baselines:
            store_baseline(root, extra, None)
        exits: Counter[int] = Counter()
        verdicts: Counter[str] = Counter()
        suite_tally: dict[str, Counter[str]] = {}
        print("| seed | exit | verdict | suites |")
        print("|---|---|---|---|")
        for seed in range(arguments.first_seed, arguments.first_seed + arguments.seeds):
            results = root / f"seed-{seed}" if arguments.fresh_baselines else root
            if arguments.fresh_baselines:
                results.mkdir()
                store_baseline(results, extra, BASELINE_SEED_OFFSET + seed)
            shape_dir = results / f"reference-{arguments.candidate}"
            known = set(shape_dir.iterdir()) if shape_dir.is_dir() else set()
            status = pytest_run(
                results,
                "--k3-endpoint",
                f"reference:{arguments.candidate}",
                "--k3-seed",
                str(seed),
                "--k3-allow-differences",
                "seed",
                "--k3-baseline",
                "tp8",
                *extra,
            )
            run_dir = new_run(results, f"reference-{arguments.candidate}", known)
            gate = json.loads((run_dir / "gate.json").read_text())
            suites = {name: entry["verdict"] for name, entry in sorted(gate["suite_verdicts"].items())}
            for name, verdict in suites.items():
                suite_tally.setdefault(name, Counter())[verdict] += 1
            exits[status] += 1
            verdicts[gate["verdict"]] += 1
            listed = ", ".join(f"{name} {verdict}" for name, verdict in suites.items())
            print(f"| {seed} | {status} | {gate['verdict']} | {listed} |", flush=True)
        print(f"exit 0 in {exits[0]} of {arguments.seeds} seeds; verdicts {dict(sorted(verdicts.items()))}")
        for name, tally in sorted(suite_tally.items()):
            print(f"{name}: {dict(sorted(tally.items()))}")


if __name__ == "__main__":
    main()
