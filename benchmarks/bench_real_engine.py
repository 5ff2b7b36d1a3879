"""The gate on a real engine: a matrix of llama.cpp settings ("shapes") serving
SmolLM2-135M-Instruct, each gated with the real plugin against a baseline with llama.cpp's
defaults, on the small-model suite (suites/test_small_model.py) at temperature 0.

Per seed, the baseline and every cell run the same `--k3-limit` items drawn with that
`--k3-seed`; the baseline is stored with --k3-save-baseline, each cell is gated with
--k3-baseline (the sequential gate, the plugin's default, so its requests can be set against
the fixed size). Weight-noise cells write a perturbed copy of the model into a temporary
folder (benchmarks/weight_noise.py; a new noise draw per seed) and delete it afterwards.

Printed: per cell, the verdict counts over seeds (gate verdict; accuracy verdict), the
accuracy change with the gate's interval, items whose answer text changed, looping and
truncation rates, requests sent against the fixed size; then the weight-noise dose-response
(FAIL rate against strength, next to the minimum detectable drop the gate reported).
The JSON of every run goes to --out. Takes about a minute per cell and seed at 80 items on
two shared cores:

    python benchmarks/bench_real_engine.py --seeds 3 --items 80 --out /tmp/real-engine

An interval wholly beyond the margin whose verdict is not FAIL is marked † and the reason
printed under the table (its FAIL test's p-value is Holm-adjusted; the interval is not).

`--pass-samples SAMPLES` is issue 31's proof on the real engine: at the plugin's default temperature
(1.0), a baseline of every item with SAMPLES samples per item, the plan the gate makes from it,
then candidates run as a user runs one (the defaults: the sequential gate, sampling in rounds where
the plan needs them): the same launch with another seed (A/A, which should PASS), RoPE scale 0.5
and weight noise 0.1 (which should FAIL):

    python benchmarks/bench_real_engine.py --pass-samples 4 --first-seed 1234 [--aa-seeds 5]

(a baseline already stored under --out is reused, so `--aa-seeds 5 --no-regressions` adds A/A seeds)

`--spread SAMPLES` measures the baseline instead, at the plugin's default temperature (1.0,
the model card's) with SAMPLES samples per item: accuracy, how it spreads over samples and
items, and the looping and truncation rates, per seed; the flagged outputs are printed to be
read:

    python benchmarks/bench_real_engine.py --spread 4 --seeds 1 --items 80
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weight_noise import perturb_model

from k3conformance.deployment.llamacpp_gate_run import GatedRun, run_suites_on_llamacpp
from k3conformance.deployment.llamacpp_server import find_model
from k3conformance.runs.records import iter_records

SUITE = "small_model"
SUITES = ("test_small_model.py",)
BASELINE = "default"
# SmolLM2-135M's RoPE base (llama.rope.freq_base in its GGUF).
ROPE_BASE = 100000.0


@dataclass(frozen=True)
class Cell:
    name: str
    kind: str  # "equivalent" or "regression"
    params: tuple[str, ...] = ()
    noise: float = 0.0  # relative weight-noise strength; 0: the shipped model


CELLS: tuple[Cell, ...] = (
    Cell("default (A/A)", "equivalent"),
    Cell("threads=2", "equivalent", ("threads=2",)),
    Cell("batch=64 ubatch=16", "equivalent", ("batch=64", "ubatch=16")),
    Cell("parallel=1", "equivalent", ("parallel=1",)),
    Cell("parallel=4", "equivalent", ("parallel=4",)),
    Cell("flash attention off", "equivalent", ("flash_attention=off",)),
    Cell("flash attention on", "equivalent", ("flash_attention=on",)),
    Cell("prompt cache off", "equivalent", ("prompt_cache=off",)),
    Cell("speculative ngram-simple", "equivalent", ("speculative=ngram-simple",)),
    Cell("KV cache q8_0", "equivalent", ("flash_attention=on", "kv_cache=q8_0")),
    Cell("weights noise 0.01", "regression", noise=0.01),
    Cell("weights noise 0.02", "regression", noise=0.02),
    Cell("weights noise 0.03", "regression", noise=0.03),
    Cell("weights noise 0.04", "regression", noise=0.04),
    Cell("weights noise 0.05", "regression", noise=0.05),
    Cell("weights noise 0.07", "regression", noise=0.07),
    Cell("weights noise 0.1", "regression", noise=0.1),
    Cell("weights noise 0.2", "regression", noise=0.2),
    Cell("RoPE base x0.5", "regression", (f"rope_freq_base={ROPE_BASE / 2:g}",)),
    Cell("RoPE scale 0.5", "regression", ("rope_freq_scale=0.5",)),
    Cell("KV cache q4_0", "regression", ("flash_attention=on", "kv_cache=q4_0")),
)


@dataclass
class CellResult:
    cell: str
    kind: str
    seed: int
    verdict: str
    accuracy_verdict: str | None
    baseline: float | None
    candidate: float | None
    difference: float | None
    lower: float | None
    upper: float | None
    min_detectable_drop: float | None
    items: int | None
    changed_texts: int
    looping: tuple[int, int]  # candidate items looping, items
    truncated: tuple[int, int]
    requests: int
    seconds: float
    reasons: list[str] = field(default_factory=list)
    # Why an interval wholly beyond the margin is not FAIL (the interval is not Holm-adjusted).
    interval_note: str | None = None


def _answers(run: GatedRun) -> dict[str, str]:
    assert run.run_dir is not None
    return {
        str(record["item"]): str((record.get("response") or {}).get("content"))
        for record in iter_records(run.run_dir, "response")
        if record["suite"] == SUITE
    }


def _rates(run: GatedRun) -> tuple[tuple[int, int], tuple[int, int]]:
    scores = run.summary()["suites"][SUITE].get("scores", {})
    items = len(scores)
    looping = sum(1 for score in scores.values() if score["looping"])
    truncated = sum(1 for score in scores.values() if score["truncated"])
    return (looping, items), (truncated, items)


def _result(cell: Cell, seed: int, run: GatedRun, baseline_answers: dict[str, str]) -> CellResult:
    gate = run.gate or {}
    comparison = gate.get("accuracy", {}).get(SUITE, {})
    answers = _answers(run)
    changed = sum(1 for item, text in answers.items() if item in baseline_answers and baseline_answers[item] != text)
    looping, truncated = _rates(run)
    return CellResult(
        cell=cell.name,
        kind=cell.kind,
        seed=seed,
        verdict=str(gate.get("verdict", f"no gate (exit {run.returncode})")),
        accuracy_verdict=comparison.get("verdict"),
        baseline=comparison.get("baseline"),
        candidate=comparison.get("candidate"),
        difference=comparison.get("difference"),
        lower=comparison.get("lower"),
        upper=comparison.get("upper"),
        min_detectable_drop=comparison.get("min_detectable_drop"),
        items=comparison.get("items"),
        changed_texts=changed,
        looping=looping,
        truncated=truncated,
        requests=int(run.summary()["requests"]["sent"]),
        seconds=run.seconds,
        reasons=list(gate.get("reasons", [])),
        interval_note=comparison.get("not_fail_because"),
    )


def run_matrix(cells: Sequence[Cell], seeds: Sequence[int], items: int, out: Path) -> list[CellResult]:
    model = find_model()
    if model is None:
        sys.exit("no SmolLM2 model: see k3conformance/deployment/llamacpp_server.py's INSTALL_HINT")
    results: list[CellResult] = []
    out.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        project = out / f"seed-{seed}"
        options = ["--k3-temperature", "0", "--k3-limit", str(items), "--k3-seed", str(seed)]
        baseline = run_suites_on_llamacpp(
            project,
            SUITES,
            model=model,
            shape=BASELINE,
            options=[*options, "--k3-save-baseline", "--k3-subset-baseline"],
        )
        if baseline.run_dir is None or baseline.summary()["status"] != "complete":
            sys.exit(f"the baseline of seed {seed} did not complete:\n{baseline.diagnostics()}")
        baseline_answers = _answers(baseline)
        looping, truncated = _rates(baseline)
        accuracy = baseline.summary()["suites"][SUITE]["accuracy"]["accuracy"]
        print(
            f"seed {seed}: baseline {accuracy:.1%} on {items} items, looping {looping[0]}/{looping[1]}, "
            f"truncated {truncated[0]}/{truncated[1]}, {baseline.seconds:.0f} s",
            flush=True,
        )
        for index, cell in enumerate(cells):
            shape = f"cell-{index:02d}"
            with tempfile.TemporaryDirectory(prefix="k3-noisy-model-") as folder:
                cell_model = model
                if cell.noise:
                    cell_model = Path(folder) / "noisy.gguf"
                    # The draw depends on the seed and the cell, not on which cells this invocation runs.
                    perturb_model(model, cell_model, cell.noise, seed=seed * 1000 + CELLS.index(cell))
                try:
                    run = run_suites_on_llamacpp(
                        project,
                        SUITES,
                        model=cell_model,
                        shape=shape,
                        params=cell.params,
                        options=[*options, "--k3-baseline", BASELINE],
                    )
                except RuntimeError as error:
                    # A setting this llama.cpp build refuses is a finding too, not the end of the matrix.
                    print(f"  {cell.name:26s} seed {seed}: the server did not start: {str(error)[-300:]}", flush=True)
                    continue
            result = _result(cell, seed, run, baseline_answers)
            results.append(result)
            print(_line(result), flush=True)
            (out / "results.json").write_text(json.dumps([vars(r) for r in results], indent=1))
    return results


@dataclass
class Spread:
    seed: int
    items: int
    samples: int
    accuracy: float
    # Per item, the share of its samples that were right; its mean p(1 - p) is the spread over
    # samples (0 when every item is always or never right, 0.25 at its largest).
    item_rates: list[float]
    looping: int  # samples the detector flagged, of items * samples
    truncated: int
    flagged: list[str]  # the answers of the items with a flagged sample, to be read


def measure_spread(seeds: Sequence[int], items: int, samples: int, out: Path) -> list[Spread]:
    """The baseline at the plugin's default temperature, `samples` samples per item."""
    model = find_model()
    if model is None:
        sys.exit("no SmolLM2 model: see k3conformance/deployment/llamacpp_server.py's INSTALL_HINT")
    spreads = []
    for seed in seeds:
        options = ["--k3-limit", str(items), "--k3-seed", str(seed), "--k3-samples", str(samples)]
        run = run_suites_on_llamacpp(out / f"spread-{seed}", SUITES, model=model, shape=BASELINE, options=options)
        if run.run_dir is None or run.summary()["status"] != "complete":
            sys.exit(f"the run of seed {seed} did not complete:\n{run.diagnostics()}")
        scores = run.summary()["suites"][SUITE]["scores"]
        looping_items = {item for item, score in scores.items() if score["looping"]}
        spread = Spread(
            seed=seed,
            items=len(scores),
            samples=samples,
            accuracy=sum(score["correct"] for score in scores.values())
            / sum(score["samples"] for score in scores.values()),
            item_rates=[score["correct"] / score["samples"] for score in scores.values()],
            looping=sum(int(score["looping"]) for score in scores.values()),
            truncated=sum(int(score["truncated"]) for score in scores.values()),
            flagged=[
                str((record.get("response") or {}).get("content"))
                for record in iter_records(run.run_dir, "response")
                if record["suite"] == SUITE and record["item"] in looping_items
            ],
        )
        spreads.append(spread)
        print(_spread_line(spread, run.seconds), flush=True)
        for text in spread.flagged:
            print(f"    answer of an item with a flagged sample: {text[:300]!r}", flush=True)
    return spreads


# A run of every item at several samples takes most of an hour on two shared cores.
PASS_TIMEOUT_S = 4 * 3600
PASS_CELLS: tuple[Cell, ...] = (
    Cell("another seed (A/A)", "equivalent"),
    Cell("RoPE scale 0.5", "regression", ("rope_freq_scale=0.5",)),
    Cell("weights noise 0.1", "regression", noise=0.1),
)


def gate_at_default_temperature(
    samples: int,
    seed: int,
    items: int,
    out: Path,
    *,
    aa_seeds: int = 1,
    aa_first: int = 1,
    regressions: bool = True,
) -> list[CellResult]:
    """Issue 31 on the real engine: the baseline at temperature 1.0 with `samples` samples per item,
    its plan, then the A/A cell gated with the plugin's defaults at `aa_seeds` seeds from seed + aa_first,
    and each regression of PASS_CELLS. A baseline already stored under `out` is reused."""
    model = find_model()
    if model is None:
        sys.exit("no SmolLM2 model: see k3conformance/deployment/llamacpp_server.py's INSTALL_HINT")
    project = out / f"pass-{seed}"
    # All items unless --items says otherwise: a limit draws the items from the seed, and the A/A
    # candidate's other seed must change its sampling only.
    limit = ["--k3-limit", str(items)] if items else []
    stored = sorted((project / "results" / BASELINE).glob("*/summary.json"))
    if stored:
        baseline = GatedRun(0, "", "", 0.0, stored[-1].parent, "")
    else:
        baseline = run_suites_on_llamacpp(
            project,
            SUITES,
            model=model,
            shape=BASELINE,
            options=[*limit, "--k3-seed", str(seed), "--k3-samples", str(samples), "--k3-save-baseline"],
            timeout_s=PASS_TIMEOUT_S,
        )
    if baseline.run_dir is None or baseline.summary()["status"] != "complete":
        sys.exit(f"the baseline did not complete:\n{baseline.diagnostics()}")
    scores = baseline.summary()["suites"][SUITE]["scores"]
    rates = [score["correct"] / score["samples"] for score in scores.values()]
    print(
        f"baseline: {len(scores)} items x {samples} samples at temperature 1.0, accuracy "
        f"{sum(rates) / len(rates):.1%}, mean p(1 - p) over items {sum(r * (1 - r) for r in rates) / len(rates):.3f}, "
        f"{baseline.seconds:.0f} s",
        flush=True,
    )
    plan = subprocess.run(
        [sys.executable, "-m", "k3conformance", "plan", BASELINE, "--results-dir", str(project / "results")],
        capture_output=True,
        text=True,
        check=False,
    )
    print(plan.stdout + plan.stderr, flush=True)
    baseline_answers = _answers(baseline)
    runs = [(PASS_CELLS[0], seed + offset) for offset in range(aa_first, aa_first + aa_seeds)]
    runs += [(cell, seed) for cell in PASS_CELLS[1:]] if regressions else []
    results: list[CellResult] = []
    for cell, candidate_seed in runs:
        index = PASS_CELLS.index(cell)
        with tempfile.TemporaryDirectory(prefix="k3-noisy-model-") as folder:
            cell_model = model
            if cell.noise:
                cell_model = Path(folder) / "noisy.gguf"
                perturb_model(model, cell_model, cell.noise, seed=seed * 1000 + index)
            run = run_suites_on_llamacpp(
                project,
                SUITES,
                model=cell_model,
                shape=f"pass-cell-{index:02d}",
                params=cell.params,
                options=[
                    *limit,
                    "--k3-seed",
                    str(candidate_seed),
                    "--k3-allow-differences",
                    "seed",
                    "--k3-baseline",
                    BASELINE,
                ],
                timeout_s=PASS_TIMEOUT_S,
            )
        result = _result(cell, candidate_seed, run, baseline_answers)
        results.append(result)
        print(f"{_line(result)}  exit {run.returncode}", flush=True)
        for line in run.stdout.splitlines()[-30:]:
            print(f"    {line}", flush=True)
        (out / f"pass-results-{seed}.json").write_text(json.dumps([vars(r) for r in results], indent=1))
    return results


def _spread_line(spread: Spread, seconds: float) -> str:
    outputs = spread.items * spread.samples
    always = sum(1 for rate in spread.item_rates if rate == 1)
    never = sum(1 for rate in spread.item_rates if rate == 0)
    within = sum(rate * (1 - rate) for rate in spread.item_rates) / len(spread.item_rates)
    return (
        f"seed {spread.seed}: {spread.items} items x {spread.samples} samples at temperature 1.0: "
        f"accuracy {spread.accuracy:.1%}; items always right {always}, never right {never}, "
        f"mixed {spread.items - always - never}; mean p(1-p) over items {within:.3f}; "
        f"looping {spread.looping}/{outputs}, truncated {spread.truncated}/{outputs}, {seconds:.0f} s"
    )


def _pts(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:+.1f}"


def _line(result: CellResult) -> str:
    return (
        f"  {result.cell:26s} seed {result.seed}: {result.verdict:12s} accuracy {result.accuracy_verdict}: "
        f"{_pts(result.difference)} pts [{_pts(result.lower)}, {_pts(result.upper)}] on {result.items} items, "
        f"{result.changed_texts} answers changed, looping {result.looping[0]}/{result.looping[1]}, "
        f"truncated {result.truncated[0]}/{result.truncated[1]}, {result.requests} requests, {result.seconds:.0f} s"
        + (f"\n    † {result.interval_note}" if result.interval_note else "")
    )


def matrix_table(results: Sequence[CellResult], items: int) -> str:
    rows = [
        "| cell | kind | seeds | gate verdicts | accuracy verdicts | change (pts) [90% interval] | "
        "answers changed | looping | truncated | requests (fixed size) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in dict.fromkeys(result.cell for result in results):
        cell = [result for result in results if result.cell == name]
        verdicts = _counts(result.verdict for result in cell)
        accuracy = _counts(str(result.accuracy_verdict) for result in cell)
        changes = "; ".join(
            f"{_pts(r.difference)} [{_pts(r.lower)}, {_pts(r.upper)}]" + ("†" if r.interval_note else "") for r in cell
        )
        rows.append(
            f"| {name} | {cell[0].kind} | {len(cell)} | {verdicts} | {accuracy} | {changes} | "
            f"{', '.join(str(r.changed_texts) for r in cell)} | "
            f"{sum(r.looping[0] for r in cell)}/{sum(r.looping[1] for r in cell)} | "
            f"{sum(r.truncated[0] for r in cell)}/{sum(r.truncated[1] for r in cell)} | "
            f"{sum(r.requests for r in cell) / len(cell):.0f} ({items}) |"
        )
    notes = [f"† {r.cell}, seed {r.seed}: {r.interval_note}" for r in results if r.interval_note]
    return "\n".join([*rows, *([""] if notes else []), *notes])


def dose_response(results: Sequence[CellResult]) -> str:
    rows = ["| noise strength | FAIL (gate) | FAIL (accuracy) | mean change (pts) | min detectable drop (pts) |"]
    rows.append("|---|---|---|---|---|")
    for name in dict.fromkeys(r.cell for r in results if r.cell.startswith("weights noise")):
        cell = [r for r in results if r.cell == name]
        changes = [r.difference for r in cell if r.difference is not None]
        drops = [r.min_detectable_drop for r in cell if r.min_detectable_drop is not None]
        rows.append(
            f"| {name.removeprefix('weights noise ')} | {sum(r.verdict == 'FAIL' for r in cell)}/{len(cell)} | "
            f"{sum(r.accuracy_verdict == 'FAIL' for r in cell)}/{len(cell)} | "
            f"{_pts(sum(changes) / len(changes)) if changes else 'n/a'} | "
            f"{(sum(drops) / len(drops) * 100) if drops else float('nan'):.1f} |"
        )
    return "\n".join(rows)


def _counts(verdicts: Any) -> str:
    counted: dict[str, int] = {}
    for verdict in verdicts:
        counted[verdict] = counted.get(verdict, 0) + 1
    return ", ".join(f"{verdict} {count}" for verdict, count in sorted(counted.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3, help="Seeds (item draws) per cell (default: 3)")
    parser.add_argument("--first-seed", type=int, default=1234, help="The first seed (default: 1234)")
    parser.add_argument("--items", type=int, default=80, help="Items per run, --k3-limit (default: 80)")
    parser.add_argument("--cells", default="", help="Comma-separated cell names to run (default: all)")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "k3-real-engine")
    parser.add_argument(
        "--spread", type=int, default=0, metavar="SAMPLES", help="Measure the baseline at temperature 1.0 instead"
    )
    parser.add_argument(
        "--pass-samples",
        type=int,
        default=0,
        metavar="SAMPLES",
        help="Gate the defaults at temperature 1.0 against a baseline of SAMPLES samples per item instead",
    )
    parser.add_argument("--aa-seeds", type=int, default=1, help="With --pass-samples: A/A candidates (default: 1)")
    parser.add_argument("--aa-first", type=int, default=1, help="With --pass-samples: the first A/A seed's offset")
    parser.add_argument("--no-regressions", action="store_true", help="With --pass-samples: the A/A cells only")
    arguments = parser.parse_args()
    wanted = {name.strip() for name in arguments.cells.split(",") if name.strip()}
    cells = [cell for cell in CELLS if not wanted or cell.name in wanted]
    started = time.monotonic()
    seeds = [arguments.first_seed + seed for seed in range(arguments.seeds)]
    if arguments.pass_samples:
        items = arguments.items if "--items" in sys.argv else 0
        gate_at_default_temperature(
            arguments.pass_samples,
            arguments.first_seed,
            items,
            arguments.out,
            aa_seeds=arguments.aa_seeds,
            aa_first=arguments.aa_first,
            regressions=not arguments.no_regressions,
        )
        print(f"\n{time.monotonic() - started:.0f} s")
        return
    if arguments.spread:
        measure_spread(seeds, arguments.items, arguments.spread, arguments.out)
        print(f"\n{time.monotonic() - started:.0f} s")
        return
    results = run_matrix(cells, seeds, arguments.items, arguments.out)
    print(f"\n{len(results)} gated runs in {time.monotonic() - started:.0f} s\n")
    print(matrix_table(results, arguments.items))
    print()
    print(dose_response(results))


if __name__ == "__main__":
    main()
