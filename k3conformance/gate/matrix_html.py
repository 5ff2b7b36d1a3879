"""The shape matrix as one static HTML page: no server, one file, opens from a CI artifact.

Everything a model wrote (reasoning, content, tool-call arguments, tool results, failure
excerpts quoting them) and everything a run recorded is untrusted here. Three layers keep it
inert: every text and attribute value goes through `html.escape` (quotes included), its control
and bidi characters written as escapes first (`formatting.page_text`); the page
has no script of its own, so the drill-down is `<details>` elements and links are in-page
anchors built from counters, never from recorded text; and a Content-Security-Policy meta tag
forbids scripts, network loads, frames, forms and base changes, should anything slip through.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from html import escape
from pathlib import Path
from typing import Any

from k3conformance.formatting import page_text
from k3conformance.gate.matrix import SIMULATOR_NOTE, Matrix, MatrixRow, cell_text, deciding_rules
from k3conformance.runs.records import iter_records

EXCERPT_CHARS = 1500
CSP = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; script-src 'none'; "
    "connect-src 'none'; frame-src 'none'; form-action 'none'; base-uri 'none'"
)
_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1em; }
th, td { border: 1px solid #ccc; padding: 4px 8px; vertical-align: top; text-align: left; }
td.PASS { background: #dff0d8; } td.FAIL { background: #f2dede; } td.INCONCLUSIVE { background: #fcf8e3; }
td.INCOMPLETE, td.ERROR { background: #e8dff5; }
pre { white-space: pre-wrap; word-break: break-word; background: #f7f7f7; padding: 6px; margin: 2px 0; max-width: 110ch; }
details { margin: 4px 0 4px 1em; } summary { cursor: pointer; }
.note { color: #8a6d3b; } .loop { color: #a94442; font-weight: bold; }
"""


def _text(value: object) -> str:
    # Control and bidi characters escaped too (ESC, U+202E): inert in a browser, but U+202E reverses
    # what the reader sees, and the file printed to a terminal would act on an ESC sequence.
    return escape(page_text(str(value)), quote=True)


def _excerpt(value: object, limit: int = EXCERPT_CHARS) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    cut = text if len(text) <= limit else text[:limit] + f"… ({len(text) - limit} more characters)"
    return f"<pre>{_text(cut)}</pre>"


def html_page(matrix: Matrix, *, records: bool = True) -> str:
    """The whole page; with `records`, the drill-down reads each candidate run's records."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_text(CSP)}">',
        f"<title>k3conformance matrix: {_text(matrix.worst())}</title>",
        f"<style>{_STYLE}</style></head><body>",
        f"<h1>k3conformance matrix: worst verdict {_text(matrix.worst())}</h1>",
        f"<p>{len(matrix.rows)} candidates against the baseline <code>{_text(matrix.baseline.label)}</code>. "
        "Cells: verdict, accuracy change in points [interval], and the rule that decided it; open a row below "
        "for its suites, items and agent turns.</p>",
    ]
    if matrix.simulated:
        parts.append(f'<p class="note">{_text(SIMULATOR_NOTE)}</p>')
    parts.append(_matrix_table(matrix))
    for index, row in enumerate(matrix.rows):
        parts.append(_row_section(index, row, matrix.suites, records))
    parts.append("</body></html>")
    return "\n".join(parts)


def _matrix_table(matrix: Matrix) -> str:
    head = "".join(f"<th>{_text(name)}</th>" for name in ["shape", "gate", *matrix.suites])
    lines = [f"<table><tr>{head}</tr>"]
    for index, row in enumerate(matrix.rows):
        cells = [
            f'<td><a href="#row-{index}">{_text(row.shape)}</a></td>',
            f'<td class="{row.verdict}">{_text(row.verdict)}</td>',
        ]
        for column, suite in enumerate(matrix.suites):
            entry = row.verdicts.suites.get(suite) if row.verdicts else None
            css = entry.verdict if entry is not None else ""
            link = f'<a href="#row-{index}-suite-{column}">{_text(cell_text(entry))}</a>' if entry else "—"
            cells.append(f'<td class="{_text(css)}">{link}</td>')
        lines.append(f"<tr>{''.join(cells)}</tr>")
    lines.append("</table>")
    return "\n".join(lines)


def _row_section(index: int, row: MatrixRow, suites: list[str], records: bool) -> str:
    parts = [f'<section id="row-{index}"><h2>{_text(row.shape)}: {_text(row.verdict)}</h2>']
    if row.error is not None or row.verdicts is None or row.candidate is None or row.result is None:
        parts.append(f"<p>not gated: {_text(row.error)}</p></section>")
        return "\n".join(parts)
    parts.append(
        f"<p>run <code>{_text(row.candidate.label)}</code>; {'fails' if row.fails() else 'does not fail'} "
        f"the gate in {_text(row.result.settings.mode)} mode</p>"
    )
    if row.result.reasons:
        parts.append("<ul>" + "".join(f"<li>{_text(reason)}</li>" for reason in row.result.reasons) + "</ul>")
    outcomes = _outcomes(row) if records else {}
    responses = _responses(row) if records else {}
    for column, suite in enumerate(suites):
        entry = row.verdicts.suites.get(suite)
        if entry is None:
            continue
        rules = "; ".join(deciding_rules(entry)) or "no rule"
        parts.append(
            f'<details id="row-{index}-suite-{column}"><summary>{_text(suite)}: {_text(entry.verdict)} '
            f"({_text(rules)})</summary>"
        )
        parts.append(
            "<table><tr><th>rule</th><th>verdict</th><th>reason</th></tr>"
            + "".join(
                f'<tr><td>{_text(d.rule)}</td><td class="{_text(d.verdict)}">{_text(d.verdict)}</td>'
                f"<td>{_text(d.reason)}</td></tr>"
                for d in entry.decided_by
            )
            + "</table>"
        )
        if entry.failing_checks:
            parts.append(f"<p>newly failing checks: {_text(', '.join(entry.failing_checks))}</p>")
        parts.append(_items(outcomes.get(suite, []), responses))
        parts.append("</details>")
    parts.append("</section>")
    return "\n".join(parts)


def _run_dir(row: MatrixRow) -> Path | None:
    return row.candidate.path.parent if row.candidate is not None and row.candidate.path is not None else None


def _outcomes(row: MatrixRow) -> dict[str, list[dict[str, Any]]]:
    run_dir = _run_dir(row)
    found: dict[str, list[dict[str, Any]]] = {}
    if run_dir is None:
        return found
    for record in iter_records(run_dir, "outcome"):
        found.setdefault(str(record.get("suite")), []).append(record)
    return found


def _responses(row: MatrixRow) -> dict[tuple[str, str, int, str], dict[str, Any]]:
    """The agentic suite's responses by (suite, item, sample, step): the turns of the drill-down."""
    run_dir = _run_dir(row)
    found: dict[tuple[str, str, int, str], dict[str, Any]] = {}
    if run_dir is None:
        return found
    for record in iter_records(run_dir, "response"):
        if record.get("suite") == "agentic_coding":
            key = (str(record["suite"]), str(record["item"]), int(record.get("sample", 0)), str(record.get("step")))
            found[key] = record
    return found


def _items(outcomes: list[dict[str, Any]], responses: Mapping[tuple[str, str, int, str], dict[str, Any]]) -> str:
    if not outcomes:
        return "<p>no item records</p>"
    rows = []
    for record in sorted(outcomes, key=lambda r: (str(r.get("item")), str(r.get("test")))):
        score = record.get("score") if isinstance(record.get("score"), dict) else None
        result = f"{score['correct']:g} of {score['samples']} correct" if score and score.get("samples") else ""
        flags = []
        if score and score.get("looping"):
            flags.append(f"looping {score['looping']} {_text(json.dumps(score.get('loop_kinds') or {}))}")
        if score and score.get("truncated"):
            flags.append(f"truncated {score['truncated']}")
        rows.append(
            f"<tr><td>{_text(record.get('item'))}</td><td>{_text(record.get('test'))}</td>"
            f"<td>{_text(record.get('outcome'))}</td><td>{_text(result)}</td><td>{'; '.join(flags)}</td>"
            f"<td>{_text(record.get('layer') or '')} {_text(record.get('message') or '')}</td></tr>"
        )
    table = (
        "<table><tr><th>item</th><th>test</th><th>outcome</th><th>score</th><th>loops, cut-offs</th>"
        "<th>failure</th></tr>" + "".join(rows) + "</table>"
    )
    return table + "".join(_agent_runs(outcomes, responses))


def _agent_runs(
    outcomes: list[dict[str, Any]], responses: Mapping[tuple[str, str, int, str], dict[str, Any]]
) -> Iterable[str]:
    for record in outcomes:
        score = record.get("score")
        if not isinstance(score, dict):
            continue
        for sample, detail in enumerate(score.get("details") or []):
            agent = detail.get("agent") if isinstance(detail, dict) else None
            if not isinstance(agent, dict):
                continue
            looped = agent.get("looping_turns") or []
            summary = (
                f"task {_text(record.get('item'))} sample {sample}: {'solved' if agent.get('solved') else 'not solved'}, "
                f"{len(agent.get('turns') or [])} turns, stopped: {_text(agent.get('stop_reason'))}"
                + (f', <span class="loop">looped at turn {_text(looped)}</span>' if looped else "")
            )
            steps = [turn for turn in agent.get("turns") or [] if isinstance(turn, dict)]
            found = [
                responses.get(("agentic_coding", str(record.get("item")), sample, str(turn.get("step"))))
                for turn in steps
            ]
            # A turn's tool results travel in the next turn's request.
            turns = [
                _turn(turn, found[position], found[position + 1] if position + 1 < len(found) else None)
                for position, turn in enumerate(steps)
            ]
            yield f"<details><summary>{summary}</summary>{''.join(turns)}</details>"


def _turn(turn: Mapping[str, Any], response: Mapping[str, Any] | None, following: Mapping[str, Any] | None) -> str:
    head = f"turn {_text(turn.get('turn'))}: finish {_text(turn.get('finish_reason'))}, calls {_text(', '.join(turn.get('tool_calls') or []))}"
    if turn.get("looping"):
        head += f' <span class="loop">LOOP in {_text(turn.get("looping_part"))} ({_text(turn.get("loop_kind"))})</span>'
    parts = [f"<details><summary>{head}</summary>"]
    body = (response or {}).get("response") or {}
    for part in ("reasoning", "content"):
        text = body.get(part)
        if not text:
            continue
        parts += [f"<div>{part}</div>", _excerpt(text)]
        if turn.get("looping") and isinstance(text, str) and len(text) > EXCERPT_CHARS:
            # A loop runs to the end of the output: its tail shows what repeats.
            parts += [
                f'<div class="loop">end of the {part} (where a loop runs to the limit)</div>',
                _excerpt(text[-600:]),
            ]
    for call in body.get("tool_calls") or []:
        function = call.get("function") or {} if isinstance(call, dict) else {}
        parts += [f"<div>call {_text(function.get('name'))}</div>", _excerpt(function.get("arguments", ""))]
    for message in _tool_results(following):
        parts += ["<div>tool result</div>", _excerpt(message)]
    for problem in turn.get("invalid") or []:
        parts.append(f"<div>invalid call: {_text(problem)}</div>")
    parts.append("</details>")
    return "".join(parts)


def _tool_results(response: Mapping[str, Any] | None) -> list[str]:
    """The tool results a turn's request carried: those of the calls of the turn before it."""
    messages = ((response or {}).get("request") or {}).get("messages") or []
    results: list[str] = []
    for message in reversed(messages):
        if not isinstance(message, dict) or message.get("role") != "tool":
            break
        results.insert(0, str(message.get("content", "")))
    return results


def write_html(matrix: Matrix, path: Path) -> Path:
    path.write_text(html_page(matrix), encoding="utf-8")
    return path
