"""The gate's verdict as text for the terminal, Markdown for CI pages, JSON, and a chart."""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from tabulate import tabulate

from k3conformance.formatting import markdown_text, percent, terminal_safe
from k3conformance.gate.sequential.chart import look_charts
from k3conformance.gate.suite_verdicts import GateVerdicts, suite_verdicts
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


# Marks a verdict whose interval lies beyond the margin though it is not FAIL; the reason is
# printed under the table.
NOTE_MARK = "†"


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
            comparison.verdict + (NOTE_MARK if comparison.not_fail_because else ""),
        ]
        for suite, comparison in sorted(result.accuracy.items())
    ]


def _interval_notes(notes: list[tuple[str, str | None]]) -> list[str]:
    """The lines under a table that explain each marked verdict: an interval beyond the margin
    beside a verdict that is not FAIL is a contradiction unless it says why."""
    return [f"{NOTE_MARK} {suite}: {note}" for suite, note in notes if note]


def _rate_rows(result: GateResult) -> list[list[str]]:
    rows = []
    for suite, rates in sorted(result.rates.items()):
        for name, rate in rates.items():
            rows.append(
                [
                    suite,
                    name,
                    _rate_cell(rate.baseline_events, rate.baseline_items, rate.baseline_rate, rate.test),
                    _rate_cell(rate.candidate_events, rate.candidate_items, rate.candidate_rate, rate.test),
                    f"{rate.p_value:.2g}" + ("" if rate.test == "fisher" else f" ({rate.test})"),
                    percent(rate.floor),
                    rate.verdict,
                ]
            )
    return rows


def _rate_cell(events: float, items: int, rate: float, test: str) -> str:
    """Items with the event out of the items (one sample each), else the share of the outputs."""
    if test == "fisher":
        return f"{events:.0f}/{items} ({percent(rate)})"
    return f"{percent(rate)} of outputs"


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


_SUITE_HEADERS = ["suite", "verdict", "decided by", "difference, pts [interval]", "min detectable drop"]


def _suite_rows(verdicts: GateVerdicts) -> list[list[str]]:
    rows = []
    for name, entry in sorted(verdicts.suites.items()):
        deciding = [d for d in entry.decided_by if d.verdict == entry.verdict] or entry.decided_by
        rules = "; ".join(f"{d.rule} {d.verdict}" for d in deciding) or "no rule"
        effect = (
            f"{_pts(entry.effect)} [{_pts(entry.interval[0])}, {_pts(entry.interval[1])}]"
            if entry.effect is not None and entry.interval is not None
            else ""
        )
        drop = f"{entry.min_detectable_drop * 100:.1f}" if entry.min_detectable_drop is not None else ""
        rows.append([name, entry.verdict + (NOTE_MARK if entry.interval_note else ""), rules, effect, drop])
    for rule in verdicts.run_rules:
        rows.append(["(the run)", rule.verdict, f"{rule.rule}: {rule.reason}", "", ""])
    return rows


def _cells(rows: list[list[str]], clean: Callable[[object], str]) -> list[list[str]]:
    return [[clean(cell) for cell in row] for row in rows]


def _sections(result: GateResult, table_format: str) -> list[tuple[str, list[str]]]:
    """(title, lines) blocks shared by the text and Markdown reports. Every text that came
    from the runs (suite and check names, excerpts of responses, server descriptions, notes)
    is escaped for where it goes: literal Markdown for "github", terminal-safe otherwise."""
    clean: Callable[[object], str] = (
        markdown_text if table_format == "github" else lambda value: terminal_safe(str(value))
    )
    confidence = round((1 - 2 * result.settings.alpha) * 100)
    blocks: list[tuple[str, list[str]]] = []
    verdicts = suite_verdicts(result)
    if verdicts.suites or verdicts.run_rules:
        table = tabulate(_cells(_suite_rows(verdicts), clean), headers=_SUITE_HEADERS, tablefmt=table_format)
        notes = _interval_notes([(name, entry.interval_note) for name, entry in sorted(verdicts.suites.items())])
        blocks.append(
            (
                "Verdict per suite (every rule that decided it; the gate's verdict is the worst of them)",
                [*table.splitlines(), *([""] if notes else []), *(clean(note) for note in notes)],
            )
        )
    if result.accuracy:
        table = tabulate(_cells(_accuracy_rows(result), clean), headers=_ACCURACY_HEADERS, tablefmt=table_format)
        notes = _interval_notes([(name, c.not_fail_because) for name, c in sorted(result.accuracy.items())])
        blocks.append(
            (
                f"Accuracy against the baseline (paired by item, {confidence}% interval before the Holm adjustment, "
                "margins per suite)",
                [*table.splitlines(), *([""] if notes else []), *(clean(note) for note in notes)],
            )
        )
    rates = _rate_rows(result)
    if rates:
        table = tabulate(_cells(rates, clean), headers=_RATE_HEADERS, tablefmt=table_format)
        blocks.append(
            (
                "Looping and truncation (one-sided Fisher exact test on the items with it at one sample an "
                "item; with more, a paired t test on the share of each item's outputs)",
                table.splitlines(),
            )
        )
    if result.regressions:
        lines = [
            f"- {clean(r.suite)}/{clean(r.check)}: passed {r.baseline_passed}× on the baseline, failed "
            f"{r.candidate_failed}× on the candidate" + (f": {clean(r.excerpt)}" if r.excerpt else "")
            for r in result.regressions
        ]
        blocks.append(("Checks that pass on the baseline and fail on the candidate", lines))
    if result.shape is not None:
        shape = result.shape
        lines = [f"- baseline {clean(shape.baseline)}", f"- candidate {clean(shape.candidate)}"]
        if shape.differences:
            lines.append(f"- differs: {clean('; '.join(shape.differences))}")
            lines.append(
                f"- so the policy requires the {clean(' and '.join(shape.required_suites))} suites on the candidate"
            )
        lines += [f"- contradiction: {clean(line)}" for line in shape.contradictions]
        blocks.append(("Deployment shape", lines))
    charts = look_charts(result.sequential)
    if charts:
        # Fixed-width rows: Markdown shows them in a code block.
        chart = ["```text", *charts, "```"] if table_format == "github" else charts
        blocks.append(("Sequential looks (* the statistic, F the FAIL bound, P the PASS bound, · zero)", chart))
    if result.notes:
        blocks.append(("Notes", [f"- {clean(note)}" for note in result.notes]))
    return blocks


def _simulated(summaries: tuple[Mapping[str, Any], ...]) -> bool:
    return any(summary.get("simulator") for summary in summaries)


def text_report(result: GateResult, *summaries: Mapping[str, Any]) -> list[str]:
    lines = [
        f"gate: {result.verdict} — {result.candidate} against the baseline {result.baseline} "
        f"({result.settings.verdict_line(result.verdict)})",
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
        (
            f"Candidate {markdown_text(result.candidate)} against the baseline {markdown_text(result.baseline)}, "
            f"{result.settings.verdict_line(result.verdict)}."
        ),
        "",
        f"The {result.settings.policy_line()}.",
        "",
    ]
    if _simulated(summaries):
        lines += [f"> {SIMULATOR_NOTE}", ""]
    lines += [f"- {markdown_text(reason)}" for reason in result.reasons] or ["- every comparison passed"]
    for title, block in _sections(result, "github"):
        lines += ["", f"### {title}", "", *block]
    lines += ["", f"_{READING}_", ""]
    return "\n".join(lines)


def write_reports(result: GateResult, run_dir: Path, *summaries: Mapping[str, Any]) -> list[Path]:
    """gate.json, gate.md and (with matplotlib installed) gate.png in the run folder; the
    Markdown is also appended to $GITHUB_STEP_SUMMARY when set. Returns what was written."""
    written = [run_dir / GATE_JSON, run_dir / GATE_MARKDOWN]
    write_json_atomic(written[0], gate_document(result))
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


def gate_document(result: GateResult) -> dict[str, Any]:
    """gate.json: the result, and per suite one verdict that includes every rule that decided it
    (`suite_verdicts`), with the run rules that belong to no suite: no script has to read `reasons`."""
    verdicts = suite_verdicts(result).to_dict()
    return {**result.to_dict(), "suite_verdicts": verdicts["suites"], "run_rules": verdicts["run_rules"]}


def json_report(result: GateResult) -> str:
    return json.dumps(gate_document(result), indent=2, sort_keys=True, default=str)


_VERDICT_COLOURS: Mapping[str, str] = {FAIL: "#c0392b", INCONCLUSIVE: "#e0a030", "INCOMPLETE": "#8e44ad"}
_PASS_COLOUR = "#3f8f4f"
_BASELINE_COLOUR = "#7a9cc6"


def chart_title(result: GateResult, verdicts: GateVerdicts, *, simulated: bool) -> str:
    """The figure's title, wrapped to fit: the verdict, the candidate and baseline, and the rules
    that decided it (the monitors' among them)."""
    deciding = sorted(
        {
            f"{name}: {decision.rule}"
            for name, entry in verdicts.suites.items()
            for decision in entry.decided_by
            if decision.verdict == result.verdict and result.verdict != "PASS"
        }
        | {rule.rule for rule in verdicts.run_rules if rule.verdict == result.verdict}
    )
    lines = [f"gate {result.verdict}: {result.candidate} against {result.baseline}"]
    if deciding:
        lines.append("decided by " + "; ".join(deciding))
    if simulated:
        lines.append("reference deployment: a SIMULATOR, not K3")
    return "\n".join(textwrap.fill(line, 110) for line in lines)


def write_chart(result: GateResult, path: Path, *, simulated: bool = False) -> Path | None:
    """Per suite: baseline against candidate accuracy with the paired interval, and the looping and
    truncation rates; each suite labelled with its verdict from every rule (monitors included).
    None when matplotlib (the `plot` extra) is not installed: the caller says so."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    verdicts = suite_verdicts(result)
    suites = sorted(result.accuracy)
    rate_suites = sorted(result.rates)
    width = max(14.0, 1.2 * (len(suites) + 2 * len(rate_suites)) + 4)
    figure, (left, middle, right) = plt.subplots(1, 3, figsize=(width, 5.6), gridspec_kw={"width_ratios": [3, 2, 2]})

    def verdict_of(suite: str) -> str:
        entry = verdicts.suites.get(suite)
        return entry.verdict if entry is not None else "PASS"

    positions = range(len(suites))
    comparisons: list[ScoreComparison] = [result.accuracy[suite] for suite in suites]
    left.bar([p - 0.2 for p in positions], [c.baseline * 100 for c in comparisons], 0.4, color=_BASELINE_COLOUR)
    # The paired interval of the change, drawn around the candidate and kept within 0-100%.
    candidate_errors = [
        [min(c.difference - c.lower, c.candidate) * 100 for c in comparisons],
        [min(c.upper - c.difference, 1 - c.candidate) * 100 for c in comparisons],
    ]
    left.bar(
        [p + 0.2 for p in positions],
        [c.candidate * 100 for c in comparisons],
        0.4,
        yerr=candidate_errors,
        capsize=4,
        color=[_VERDICT_COLOURS.get(verdict_of(suite), _PASS_COLOUR) for suite in suites],
    )
    left.set_xticks(list(positions), [f"{s}\n{verdict_of(s)}" for s in suites], rotation=25, ha="right")
    left.set_ylabel("accuracy, %")
    left.set_ylim(0, 120)  # headroom for the legend above 100%
    left.set_yticks(range(0, 101, 20))
    left.legend(["baseline", "candidate (paired interval; colour: suite verdict)"], loc="upper right", fontsize="small")
    left.set_title("accuracy (label: the suite's verdict, every rule)")
    for axis, name, label in (
        (middle, "looping", "outputs ending in a loop, %"),
        (right, "truncation", "truncated, %"),
    ):
        shown = [suite for suite in rate_suites if name in result.rates[suite]]
        rates = [result.rates[suite][name] for suite in shown]
        axis.bar(
            [p - 0.2 for p in range(len(shown))], [r.baseline_rate * 100 for r in rates], 0.4, color=_BASELINE_COLOUR
        )
        axis.bar(
            [p + 0.2 for p in range(len(shown))],
            [r.candidate_rate * 100 for r in rates],
            0.4,
            color=[_VERDICT_COLOURS.get(r.verdict, _PASS_COLOUR) for r in rates],
        )
        axis.set_xticks(
            list(range(len(shown))),
            [f"{s}\n{r.verdict}" for s, r in zip(shown, rates, strict=True)],
            rotation=25,
            ha="right",
        )
        axis.set_ylabel(label)
        axis.set_title(f"{name} (label: the rate test)")
        axis.set_ylim(0, max([5.0, *(max(r.baseline_rate, r.candidate_rate) * 120 for r in rates)]))
        axis.legend(["baseline", "candidate"], fontsize="small")
    figure.suptitle(chart_title(result, verdicts, simulated=simulated), fontsize="medium")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
