"""The gate's verdict as text for the terminal, Markdown for CI pages, JSON, and a chart."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tabulate import tabulate

from k3conformance.formatting import percent
from k3conformance.gate.sequential.chart import look_charts
from k3conformance.gate.verdict import GateResult
from k3conformance.runs.records import write_json_atomic
from k3conformance.stats.paired import FAIL, INCONCLUSIVE, ScoreComparison

GATE_JSON = "gate.json"
GATE_MARKDOWN = "gate.md"
GATE_CHART = "gate.png"
STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"
SIMULATOR_NOTE = (
    "NOTE: the reference deployment is a simulator; verdicts on it show how the gate works, not how K3 does."
)
READING = (
    "PASS: the loss is shown to be under the margin. FAIL: a loss beyond the margin is shown. INCONCLUSIVE: "
    "the data allow either; the minimum detectable drop is the loss this size catches 4 times in 5."
)


def _pts(share: float) -> str:
    return f"{share * 100:+.1f}"


def _accuracy_rows(result: GateResult) -> list[list[str]]:
    return [
        [
            suite,
            "accuracy",
            percent(comparison.baseline),
            percent(comparison.candidate),
            f"{_pts(comparison.difference)} [{_pts(comparison.lower)}, {_pts(comparison.upper)}]",
            f"{comparison.min_detectable_drop * 100:.1f}",
            f"{comparison.items}",
            comparison.verdict,
        ]
        for suite, comparison in sorted(result.accuracy.items())
    ]


def _rate_rows(result: GateResult) -> list[list[str]]:
    rows = []
    for suite, rates in sorted(result.rates.items()):
        for name, rate in rates.items():
            rows.append(
                [
                    suite,
                    name,
                    f"{rate.baseline_events}/{rate.baseline_items} ({percent(rate.baseline_rate)})",
                    f"{rate.candidate_events}/{rate.candidate_items} ({percent(rate.candidate_rate)})",
                    f"{rate.p_value:.2g}",
                    percent(rate.floor),
                    rate.verdict,
                ]
            )
    return rows


_ACCURACY_HEADERS = [
    "suite",
    "metric",
    "baseline",
    "candidate",
    "difference, pts [interval]",
    "min detectable drop",
    "items",
    "verdict",
]
_RATE_HEADERS = ["suite", "rate", "baseline", "candidate", "p (higher)", "floor", "verdict"]


def _sections(result: GateResult, table_format: str) -> list[tuple[str, list[str]]]:
    """(title, lines) blocks shared by the text and Markdown reports."""
    confidence = round((1 - 2 * result.settings.alpha) * 100)
    blocks: list[tuple[str, list[str]]] = []
    if result.accuracy:
        table = tabulate(_accuracy_rows(result), headers=_ACCURACY_HEADERS, tablefmt=table_format)
        blocks.append(
            (
                f"Accuracy against the baseline (paired by item, {confidence}% interval, margins per suite)",
                table.splitlines(),
            )
        )
    rates = _rate_rows(result)
    if rates:
        table = tabulate(rates, headers=_RATE_HEADERS, tablefmt=table_format)
        blocks.append(
            ("Looping and truncation (one-sided Fisher exact test; items with it in any sample)", table.splitlines())
        )
    if result.regressions:
        lines = [
            f"- {r.suite}/{r.check}: passed {r.baseline_passed}× on the baseline, failed {r.candidate_failed}× on the candidate"
            + (f": {r.excerpt}" if r.excerpt else "")
            for r in result.regressions
        ]
        blocks.append(("Checks that pass on the baseline and fail on the candidate", lines))
    if result.shape is not None:
        shape = result.shape
        lines = [f"- baseline {shape.baseline}", f"- candidate {shape.candidate}"]
        if shape.differences:
            lines.append(f"- differs: {'; '.join(shape.differences)}")
            lines.append(f"- so the policy requires the {' and '.join(shape.required_suites)} suites on the candidate")
        lines += [f"- contradiction: {line}" for line in shape.contradictions]
        blocks.append(("Deployment shape", lines))
    charts = look_charts(result.sequential)
    if charts:
        # Fixed-width rows: Markdown shows them in a code block.
        chart = ["```text", *charts, "```"] if table_format == "github" else charts
        blocks.append(("Sequential looks (* the statistic, F the FAIL bound, P the PASS bound, · zero)", chart))
    if result.notes:
        blocks.append(("Notes", [f"- {note}" for note in result.notes]))
    return blocks


def _simulated(summaries: tuple[Mapping[str, Any], ...]) -> bool:
    return any(summary.get("simulator") for summary in summaries)


def text_report(result: GateResult, *summaries: Mapping[str, Any]) -> list[str]:
    lines = [
        f"gate: {result.verdict} — {result.candidate} against the baseline {result.baseline} "
        f"({result.settings.mode_line})",
        f"  {result.settings.policy_line()}",
    ]
    lines += [f"  {reason}" for reason in result.reasons]
    for title, block in _sections(result, "simple"):
        lines += ["", f"{title}:", *block]
    lines += ["", READING]
    if _simulated(summaries):
        lines.append(SIMULATOR_NOTE)
    return lines


def markdown_report(result: GateResult, *summaries: Mapping[str, Any]) -> str:
    lines = [
        f"## k3conformance gate: **{result.verdict}**",
        "",
        (f"Candidate `{result.candidate}` against the baseline `{result.baseline}`, {result.settings.mode_line}."),
        "",
        f"The {result.settings.policy_line()}.",
        "",
    ]
    if _simulated(summaries):
        lines += [f"> {SIMULATOR_NOTE}", ""]
    lines += [f"- {reason}" for reason in result.reasons] or ["- every comparison passed"]
    for title, block in _sections(result, "github"):
        lines += ["", f"### {title}", "", *block]
    lines += ["", f"_{READING}_", ""]
    return "\n".join(lines)


def write_reports(result: GateResult, run_dir: Path, *summaries: Mapping[str, Any]) -> list[Path]:
    """gate.json, gate.md and (with matplotlib installed) gate.png in the run folder; the
    Markdown is also appended to $GITHUB_STEP_SUMMARY when set. Returns what was written."""
    written = [run_dir / GATE_JSON, run_dir / GATE_MARKDOWN]
    write_json_atomic(written[0], result.to_dict())
    markdown = markdown_report(result, *summaries)
    written[1].write_text(markdown, encoding="utf-8")
    step_summary = os.environ.get(STEP_SUMMARY_ENV)
    if step_summary:
        with open(step_summary, "a", encoding="utf-8") as handle:
            handle.write(markdown + "\n")
    chart = write_chart(result, run_dir / GATE_CHART, simulated=_simulated(summaries))
    if chart is not None:
        written.append(chart)
    return written


def json_report(result: GateResult) -> str:
    return json.dumps(result.to_dict(), indent=2, sort_keys=True, default=str)


def write_chart(result: GateResult, path: Path, *, simulated: bool = False) -> Path | None:
    """Baseline against candidate accuracy per suite with the paired interval, and the
    looping rates; None when matplotlib (the `plot` extra) is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    suites = sorted(result.accuracy)
    looping = {suite: rates["looping"] for suite, rates in result.rates.items() if "looping" in rates}
    width = max(10.0, 1.3 * (len(suites) + len(looping)) + 3)
    figure, (left, right) = plt.subplots(1, 2, figsize=(width, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    positions = range(len(suites))
    comparisons: list[ScoreComparison] = [result.accuracy[suite] for suite in suites]
    left.bar(
        [p - 0.2 for p in positions], [c.baseline * 100 for c in comparisons], 0.4, label="baseline", color="#7a9cc6"
    )
    # The paired interval of the change, drawn around the candidate and kept within 0-100%.
    candidate_errors = [
        [min(c.difference - c.lower, c.candidate) * 100 for c in comparisons],
        [min(c.upper - c.difference, 1 - c.candidate) * 100 for c in comparisons],
    ]
    colours = [
        "#c0392b" if c.verdict == FAIL else "#e0a030" if c.verdict == INCONCLUSIVE else "#3f8f4f" for c in comparisons
    ]
    left.bar(
        [p + 0.2 for p in positions],
        [c.candidate * 100 for c in comparisons],
        0.4,
        yerr=candidate_errors,
        capsize=4,
        label="candidate (paired interval)",
        color=colours,
    )
    left.set_xticks(list(positions), [f"{s}\n{result.accuracy[s].verdict}" for s in suites], rotation=25, ha="right")
    left.set_ylabel("accuracy, %")
    left.set_ylim(0, 120)  # headroom for the legend above 100%
    left.set_yticks(range(0, 101, 20))
    left.legend(["baseline", "candidate (paired interval; colour: verdict)"], loc="upper right", fontsize="small")
    left.set_title("accuracy")
    loop_suites = sorted(looping)
    right.bar(
        [p - 0.2 for p in range(len(loop_suites))],
        [looping[s].baseline_rate * 100 for s in loop_suites],
        0.4,
        label="baseline",
        color="#7a9cc6",
    )
    right.bar(
        [p + 0.2 for p in range(len(loop_suites))],
        [looping[s].candidate_rate * 100 for s in loop_suites],
        0.4,
        label="candidate",
        color="#c0392b",
    )
    right.set_xticks(
        list(range(len(loop_suites))), [f"{s}\n{looping[s].verdict}" for s in loop_suites], rotation=25, ha="right"
    )
    right.set_ylabel("outputs ending in a loop, %")
    right.set_title("looping")
    right.set_ylim(0, max([5.0, *(max(r.baseline_rate, r.candidate_rate) * 120 for r in looping.values())]))
    right.legend(fontsize="small")
    note = " (reference deployment: a SIMULATOR)" if simulated else ""
    figure.suptitle(f"{result.candidate} vs {result.baseline}: {result.verdict}{note}")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
