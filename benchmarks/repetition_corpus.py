"""Precision and recall of the repetition detector on the labelled corpus.

    python fixtures/repetition/build_corpus.py   # (re)build the corpus, deterministic
    python benchmarks/repetition_corpus.py        # figures for docs/gating.md

A loop counts as found when `detect` says looping; its kind as right when the report's
kind is the item's shape and `escaped` matches the label. Precision is over everything
flagged; recall is over all loops, and again without the items marked irregular (loops
with no period, which the detector is not built to see).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from k3conformance.scoring.repetition import RepetitionReport, detect

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "repetition" / "corpus.json"


def kind_right(item: dict[str, Any], report: RepetitionReport) -> bool:
    return report.kind == item.get("shape") and report.escaped == (item["label"] == "escaped")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    args = parser.parse_args()
    items = json.loads(args.corpus.read_text(encoding="utf-8"))["items"]
    started = time.perf_counter()
    reports = [detect(item["text"]) for item in items]
    seconds = time.perf_counter() - started
    rows: Counter[tuple[str, str]] = Counter()
    for item, report in zip(items, reports, strict=True):
        label = item["label"] + (" (irregular)" if item.get("irregular") else "")
        rows[label, "items"] += 1
        rows[label, "flagged"] += report.looping
        rows[label, "kind right"] += report.looping and kind_right(item, report)
    print(f"{'label':<22} {'items':>6} {'flagged':>8} {'kind right':>11}")
    for label in sorted({label for label, _ in rows}):
        print(f"{label:<22} {rows[label, 'items']:>6} {rows[label, 'flagged']:>8} {rows[label, 'kind right']:>11}")
    loops = [(item, report) for item, report in zip(items, reports, strict=True) if item["label"] != "healthy"]
    regular = [(item, report) for item, report in loops if not item.get("irregular")]
    flagged = sum(report.looping for report in reports)
    true_flags = sum(report.looping for _, report in loops)
    print(f"precision {true_flags}/{flagged} = {true_flags / max(flagged, 1):.3f}")
    print(f"recall    {true_flags}/{len(loops)} = {true_flags / len(loops):.3f}")
    found_regular = sum(report.looping for _, report in regular)
    print(f"recall without irregular loops {found_regular}/{len(regular)} = {found_regular / len(regular):.3f}")
    right = sum(report.looping and kind_right(item, report) for item, report in regular)
    print(f"kind and escaped right on regular loops {right}/{len(regular)}")
    characters = sum(len(item["text"]) for item in items)
    print(f"{len(items)} texts, {characters:,} characters, {seconds:.2f} s")
    for item, report in zip(items, reports, strict=True):
        wrong = report.looping != (item["label"] != "healthy") or (report.looping and not kind_right(item, report))
        if wrong:
            print(f"  miss: {item['id']}: looping={report.looping} kind={report.kind} escaped={report.escaped}")


if __name__ == "__main__":
    main()
