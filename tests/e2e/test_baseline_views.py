"""The baseline's derived views are computed once per session: its A/A partner (a scan and
validation of every neighbouring run) and each suite's item totals (read after every finished
test by the sequential gate). Counted in a real gated run on the reference deployment (a simulator)."""

from __future__ import annotations

from collections import Counter

import pytest
from run_files import copy_suites

from k3conformance.gate.sequential import plan
from k3conformance.runs.stored import StoredRun

COMMON = ("test_math.py", "--k3-results-dir", "out", "-p", "no:cacheprovider", "--k3-shape", "tp8")


def test_a_gated_run_derives_each_baseline_view_once(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy_suites(pytester.path, ["test_math.py"])
    for _ in range(2):  # a baseline and its A/A partner
        assert pytester.runpytest("--k3-endpoint", "reference:tp8", "--k3-save-baseline", *COMMON).ret == 0
    partners: list[str] = []
    totals: Counter[tuple[int, str]] = Counter()
    find_partner, build_totals = plan.a_a_partner, StoredRun._build_item_totals

    def counted_partner(baseline: StoredRun) -> StoredRun | None:
        partners.append(baseline.label)
        return find_partner(baseline)

    def counted_totals(run: StoredRun, suite: str) -> dict[str, object]:
        totals[(id(run), suite)] += 1
        return dict(build_totals(run, suite))

    monkeypatch.setattr(plan, "a_a_partner", counted_partner)
    monkeypatch.setattr(StoredRun, "_build_item_totals", counted_totals)
    result = pytester.runpytest("--k3-endpoint", "reference:tp8", "--k3-baseline", "tp8", *COMMON)
    result.stdout.fnmatch_lines(["*gating against the baseline tp8/*", "*sequential*"])
    assert len(partners) == 1, partners
    assert totals and max(totals.values()) == 1, totals
