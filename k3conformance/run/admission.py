"""Which runs `--k3-save-baseline` stores as a baseline, and which it refuses.

A baseline defines the evidence every later candidate is judged on: its items are the items a
candidate must cover, its scores the ones a loss is measured from. So a run is stored as one
only when it is the whole of what it names: every item of the datasets (no -k, -m, node ids,
--ignore, --deselect, --k3-limit or --k3-max-items; `--k3-subset-baseline` declares a subset on
purpose and every gate against it says so), complete, its --k3-shape label not contradicted by
the server's own arguments, and, when it was itself gated, not failing that gate. Issue 21,
reproduction 5: an EP32 MegaMoE run labelled tp8, a run that failed its own gate and a
`--k3-limit 2` run each became the newest tp8 baseline.

What is known before anything runs is refused then (a usage error); the rest at the end of the
session: the run is kept, marked `baseline: false` with the reasons, and the session fails.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pytest

from k3conformance.options import Settings
from k3conformance.runs.records import STATUS_COMPLETE

if TYPE_CHECKING:
    from k3conformance.gate.verdict import GateResult
    from k3conformance.runs.schema import RunSummary

DECLARE = "--k3-subset-baseline"


def subset_reasons(config: pytest.Config, settings: Settings) -> list[str]:
    """How the command line selects fewer than every item of the suites it names."""
    reasons = []
    if config.option.keyword:
        reasons.append(f"-k {config.option.keyword!r}")
    if config.option.markexpr:
        reasons.append(f"-m {config.option.markexpr!r}")
    node_ids = [argument for argument in config.args if "::" in argument]
    if node_ids:
        reasons.append(f"node ids ({', '.join(node_ids[:3])}{', ...' if len(node_ids) > 3 else ''})")
    for option, flag in (("deselect", "--deselect"), ("ignore", "--ignore"), ("ignore_glob", "--ignore-glob")):
        values: Sequence[str] | None = config.getoption(option, None)
        if values:
            reasons.append(f"{flag} {' '.join(str(value) for value in values)}")
    if settings.limit is not None:
        reasons.append(f"--k3-limit {settings.limit}")
    if settings.max_items is not None:
        reasons.append(f"--k3-max-items {settings.max_items}")
    return reasons


def refuse_subset_up_front(config: pytest.Config, settings: Settings) -> None:
    if not settings.save_baseline or settings.subset_baseline:
        return
    reasons = subset_reasons(config, settings)
    if reasons:
        raise pytest.UsageError(
            f"--k3-save-baseline: this run selects a subset of the items ({'; '.join(reasons)}): a baseline must run "
            f"every item of its suites, since a candidate is judged on the baseline's items; drop the selection, or "
            f"declare the subset on purpose with {DECLARE}"
        )


def end_reasons(summary: RunSummary, gate: GateResult | None) -> list[str]:
    """Why the finished run may not be stored as a baseline; empty when it may."""
    reasons = []
    if summary["status"] != STATUS_COMPLETE:
        reasons.append(f"the run is {summary['status']}, not complete (finish it with --k3-resume)")
    contradictions = (summary.get("shape_settings") or {}).get("contradictions") or []
    if contradictions:
        reasons.append(
            f"the server's own arguments contradict --k3-shape {summary['shape']} ({len(contradictions)} "
            f"contradictions: {contradictions[0]})"
        )
    if gate is not None and gate.fails():
        reasons.append(f"the run failed its own gate ({gate.verdict} against {gate.baseline})")
    return reasons
