"""The shape matrix: every stored candidate shape against one baseline, in one view.

A release engineer choosing which of several layouts may be enabled read one `compare` per
candidate: a gate.md, a gate.png and an exit status each. Here each candidate is gated exactly as
`k3conformance compare` gates it (`gate_stored`: the fixed-size comparison, then the replay of a
sequential run's rule), and the per-suite verdicts (gate/suite_verdicts.py, every rule included)
become one row per shape and a column per suite. The exit status is the worst row's: 1 when any
candidate's gate fails in the chosen mode, else 0 (2 on bad input, as `compare`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tabulate import tabulate

from k3conformance.gate.settings import GateSettings
from k3conformance.gate.signed import require_signed
from k3conformance.gate.suite_verdicts import SEVERITY, GateVerdicts, SuiteVerdict, suite_verdicts
from k3conformance.gate.verdict import GateResult, judge
from k3conformance.runs.records import SUMMARY_FILE
from k3conformance.runs.signature import PublicKey
from k3conformance.runs.stored import BaselineError, StoredRun, check_not_the_baseline, check_same_datasets, load_run

SIMULATOR_NOTE = (
    "NOTE: runs against the reference deployment (a simulator): the verdicts show how the gate works, not how K3 does."
)


def gate_stored(baseline: StoredRun, candidate: StoredRun, settings: GateSettings) -> GateResult:
    """Gate a stored candidate as `pytest --k3-baseline` did: a run gated sequentially is re-gated by
    replaying its rule against this baseline and these settings."""
    result = judge(baseline, candidate, settings)
    stored = candidate.summary.get("sequential")
    if stored:
        from k3conformance.gate.evidence import judged_on_records
        from k3conformance.gate.sequential.apply import apply_sequential
        from k3conformance.gate.sequential.replay import replay_sequential

        # Replayed on the item scores the records hold, as `judge` judged them.
        replayed = replay_sequential(
            stored, judged_on_records(baseline).run, judged_on_records(candidate).run, settings
        )
        result.notes += replayed.notes
        apply_sequential(result, replayed.paths, baseline)
    return result


@dataclass
class MatrixRow:
    shape: str
    candidate: StoredRun | None
    result: GateResult | None
    verdicts: GateVerdicts | None
    # Why the candidate could not be gated (a missing run, other datasets): the row says so.
    error: str | None = None

    @property
    def verdict(self) -> str:
        return self.verdicts.verdict if self.verdicts is not None else "ERROR"

    def fails(self) -> bool:
        return self.result is None or self.result.fails()


@dataclass
class Matrix:
    baseline: StoredRun
    rows: list[MatrixRow] = field(default_factory=list)
    # The policy every row was judged under: printed with the matrix, weaker parts marked.
    settings: GateSettings = field(default_factory=GateSettings)

    @property
    def suites(self) -> list[str]:
        return sorted({suite for row in self.rows if row.verdicts for suite in row.verdicts.suites})

    @property
    def simulated(self) -> bool:
        runs = [self.baseline, *(row.candidate for row in self.rows if row.candidate is not None)]
        return any(run.summary.get("simulator") for run in runs)

    def exit_status(self) -> int:
        if any(row.error for row in self.rows):
            return 2
        return 1 if any(row.fails() for row in self.rows) else 0

    def worst(self) -> str:
        verdicts = [row.verdict for row in self.rows if row.verdicts is not None]
        return max(verdicts, key=lambda verdict: SEVERITY[verdict], default="PASS")


def candidate_shapes(results_dir: Path, baseline: StoredRun) -> list[str]:
    """Every shape stored under `results_dir` but the baseline's own, for `matrix BASELINE` alone."""
    own = baseline.summary["shape"]
    if not results_dir.is_dir():
        return []
    return sorted(
        path.name
        for path in results_dir.iterdir()
        if path.is_dir() and path.name != own and any(run.joinpath(SUMMARY_FILE).is_file() for run in path.iterdir())
    )


def build_matrix(
    baseline: StoredRun,
    candidates: list[str],
    results_dir: Path,
    settings: GateSettings,
    trusted: Sequence[PublicKey] | None = None,
) -> Matrix:
    """Each candidate gated against `baseline`; with `trusted` keys (--require-signed), each pair's
    signatures verified too (gate/signed.py)."""
    matrix = Matrix(baseline, settings=settings)
    for reference in candidates:
        try:
            candidate = load_run(reference, results_dir, baseline=False)
            check_not_the_baseline(baseline, candidate)
            check_same_datasets(baseline, candidate.dataset_sources())
        except BaselineError as error:
            matrix.rows.append(MatrixRow(reference, None, None, None, str(error)))
            continue
        result = gate_stored(baseline, candidate, settings)
        if trusted is not None:
            require_signed(result, [baseline, candidate], trusted)
        matrix.rows.append(MatrixRow(candidate.summary["shape"], candidate, result, suite_verdicts(result)))
    return matrix


def _pts(share: float) -> str:
    return f"{share * 100:+.1f}"


def deciding_rules(entry: SuiteVerdict) -> list[str]:
    """The rules that gave the suite its verdict (those with that verdict), each once, with how
    many times it decided ("conformance check regression ×4": the checks are in the details)."""
    counts = Counter(decision.rule for decision in entry.decided_by if decision.verdict == entry.verdict)
    return [rule if count == 1 else f"{rule} ×{count}" for rule, count in counts.items()]


def cell_text(entry: SuiteVerdict | None) -> str:
    """`FAIL -12.5 [-44.5, +20.4] by sequential gate: looping monitor`: verdict, effect, interval, and the
    rule when it is not the plain accuracy comparison; and, for an interval beyond the margin that
    is not FAIL, why (the interval is not Holm-adjusted)."""
    if entry is None:
        return "—"
    if entry.not_run is not None:
        return f"{entry.verdict}: not run to the end, {entry.not_run}"
    text = entry.verdict
    if entry.effect is not None and entry.interval is not None:
        text += f" {_pts(entry.effect)} [{_pts(entry.interval[0])}, {_pts(entry.interval[1])}]"
    rules = [rule for rule in deciding_rules(entry) if not rule.startswith("accuracy (")]
    if rules and entry.verdict != "PASS":
        text += " by " + "; ".join(rules)
    if entry.interval_note:
        text += f" ({entry.interval_note})"
    return text


def _rows(matrix: Matrix) -> list[list[str]]:
    rows = []
    for row in matrix.rows:
        if row.verdicts is None:
            rows.append([row.shape, "ERROR", *["—" for _ in matrix.suites]])
            continue
        cells = [cell_text(row.verdicts.suites.get(suite)) for suite in matrix.suites]
        rows.append([row.shape, row.verdict + (" (fails)" if row.fails() else ""), *cells])
    return rows


def _details(matrix: Matrix) -> list[str]:
    """Per row: newly failing checks, the minimum detectable drop per suite, run rules, errors."""
    lines = []
    for row in matrix.rows:
        if row.error is not None:
            lines.append(f"{row.shape}: not gated: {row.error}")
            continue
        assert row.verdicts is not None
        checks = [f"{name}/{check}" for name, entry in row.verdicts.suites.items() for check in entry.failing_checks]
        if checks:
            lines.append(f"{row.shape}: newly failing checks: {', '.join(checks)}")
        drops = [
            f"{name} {entry.min_detectable_drop * 100:.1f}"
            for name, entry in sorted(row.verdicts.suites.items())
            if entry.min_detectable_drop is not None
        ]
        if drops:
            lines.append(f"{row.shape}: minimum detectable drop, pts: {', '.join(drops)}")
        lines += [f"{row.shape}: {rule.verdict} by {rule.rule}: {rule.reason}" for rule in row.verdicts.run_rules]
    return lines


def _headers(matrix: Matrix) -> list[str]:
    return ["shape", "gate", *matrix.suites]


def text_matrix(matrix: Matrix) -> list[str]:
    lines = [
        f"k3conformance matrix: {len(matrix.rows)} candidates against the baseline {matrix.baseline.label}; "
        f"worst verdict {matrix.worst()}",
        "cells: verdict, accuracy change in points [interval], and the rule that decided it",
        matrix.settings.policy_line(),
        "",
        *tabulate(_rows(matrix), headers=_headers(matrix), tablefmt="simple").splitlines(),
        "",
        *_details(matrix),
    ]
    if matrix.simulated:
        lines.append(SIMULATOR_NOTE)
    return lines


def markdown_matrix(matrix: Matrix) -> str:
    lines = [
        f"## k3conformance matrix: worst verdict **{matrix.worst()}**",
        "",
        f"{len(matrix.rows)} candidates against the baseline `{matrix.baseline.label}`. Cells: verdict, accuracy "
        "change in points [interval], and the rule that decided it.",
        "",
        f"The {matrix.settings.policy_line()}.",
        "",
    ]
    if matrix.simulated:
        lines += [f"> {SIMULATOR_NOTE}", ""]
    lines += tabulate(
        [[cell.replace("|", "\\|") for cell in row] for row in _rows(matrix)],
        headers=_headers(matrix),
        tablefmt="github",
    ).splitlines()
    details = _details(matrix)
    if details:
        lines += ["", *[f"- {line}" for line in details]]
    return "\n".join(lines) + "\n"


def matrix_document(matrix: Matrix) -> dict[str, Any]:
    rows = []
    for row in matrix.rows:
        entry: dict[str, Any] = {"shape": row.shape, "verdict": row.verdict, "fails": row.fails(), "error": row.error}
        if row.verdicts is not None and row.candidate is not None:
            entry.update(
                run=row.candidate.label,
                suites=row.verdicts.to_dict()["suites"],
                run_rules=row.verdicts.to_dict()["run_rules"],
            )
        rows.append(entry)
    return {
        "baseline": matrix.baseline.label,
        "suites": matrix.suites,
        "worst": matrix.worst(),
        "exit_status": matrix.exit_status(),
        "simulator": matrix.simulated,
        "policy": matrix.settings.policy(),
        "rows": rows,
    }
