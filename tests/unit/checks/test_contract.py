"""The contract table's design, exclusions and sizing rules (checks/contract.py)."""

from __future__ import annotations

import pytest

from k3conformance.checks import contract
from k3conformance.checks.failures import ConformanceFailure
from k3conformance.endpoint.completion import Completion
from k3conformance.stats.covering import covered_pairs


def _completion(**fields: object) -> Completion:
    values: dict[str, object] = {
        "content": "Take an umbrella and a light coat today.",
        "reasoning": "Rain in Paris calls for an umbrella.",
        "reasoning_field": "reasoning_content",
        "tool_calls": None,
        "finish_reason": "stop",
        "usage": {
            "prompt_tokens": 10,
            "completion_tokens": 15,
            "total_tokens": 25,
            "completion_tokens_details": {"reasoning_tokens": 7},
        },
        "model": "m",
        "latency_s": 0.0,
        **fields,
    }
    return Completion(**values)  # type: ignore[arg-type]


CELL = {
    "stream": "off",
    "thinking": "high",
    "tools": "none-offered",
    "ending": "stop",
    "history": "first",
    "load": "alone",
}


def test_the_design_holds_no_excluded_cell_and_every_allowed_pair() -> None:
    cells = contract.design()
    assert all(contract.allowed(cell) for cell in cells)
    assert len({contract.cell_id(cell) for cell in cells}) == len(cells)
    pairs = covered_pairs(cells)
    for first, second in [("tools", "ending"), ("thinking", "ending"), ("history", "load"), ("stream", "ending")]:
        for a in contract.DIMENSIONS[first]:
            for b in contract.DIMENSIONS[second]:
                possible = any(contract.allowed({**CELL, first: a, second: b, **fix}) for fix in _fixes(first, second))
                assert ((first, a, second, b) in pairs) == possible, (first, a, second, b)


def _fixes(*dimensions: str) -> list[dict[str, str]]:
    import itertools

    free = [name for name in contract.DIMENSIONS if name not in dimensions]
    return [
        dict(zip(free, values, strict=True)) for values in itertools.product(*(contract.DIMENSIONS[n] for n in free))
    ]


def test_endings_are_sized_from_the_first_response() -> None:
    first = _completion()
    assert contract.budget_for("length-reasoning", first) == 3
    assert contract.budget_for("length-answer", first) == 7 + 4
    assert contract.budget_for("length-tool-args", first) is None  # no call to cut
    word = contract.stop_word_for(first)
    assert word is not None and word not in (first.reasoning or "") and first.content and first.content.find(word) > 0


def test_a_violation_names_the_cell_and_the_clause() -> None:
    observed = contract.Observed(cell=CELL, completions=[_completion(finish_reason="stop_163586")])
    with pytest.raises(ConformanceFailure) as failure:
        contract.check_finish_reason_as_ended(observed)
    assert f"clause finish_reason_as_ended at cell {contract.cell_id(CELL)}" in str(failure.value)
    contract.check_finish_reason_as_ended(contract.Observed(cell=CELL, completions=[_completion()]))


def test_reasoning_tokens_reported_as_zero_break_usage() -> None:
    zero = {
        "prompt_tokens": 10,
        "completion_tokens": 15,
        "total_tokens": 25,
        "completion_tokens_details": {"reasoning_tokens": 0},
    }
    with pytest.raises(ConformanceFailure, match="usage_adds_up"):
        contract.check_usage_adds_up(contract.Observed(cell=CELL, completions=[_completion(usage=zero)]))
    contract.check_usage_adds_up(contract.Observed(cell=CELL, completions=[_completion()]))


def test_the_docs_table_is_the_code_table() -> None:
    """docs/api-contract.md shows the table the checks are generated from, row for row."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[3] / "docs" / "api-contract.md").read_text()
    for clause in contract.CLAUSES:
        assert f"| `{clause.id}` | {clause.rule} | {clause.where} | {clause.layer} |" in page, clause.id
    for rule, _ in contract.EXCLUDED:
        assert f"- {rule}." in page, rule
    for name, levels in contract.DIMENSIONS.items():
        assert f"| {name} | {', '.join(f'`{level}`' for level in levels)} |" in page, name
    assert f"{len(contract.design())} cells in all" in page


def test_every_known_disagreement_names_a_cell_of_the_design_and_a_clause_that_applies_there() -> None:
    from k3conformance.checks.contract_known import load_known
    from k3conformance.xtml.parsers import REFERENCE_PARSER_NAMES

    cells = {contract.cell_id(cell): cell for cell in contract.design()}
    rows = load_known()
    assert rows, "the file records the llama.cpp column's disagreements"
    assert len({(row.parser, row.cell, row.clause) for row in rows}) == len(rows)
    for row in rows:
        assert row.parser.split(" ")[0] in REFERENCE_PARSER_NAMES, row
        assert row.cell in cells, row
        assert contract.applies(row.clause, cells[row.cell]), row
        assert row.note, row


def test_a_known_disagreement_is_found_for_the_parser_the_reference_reports_and_no_other() -> None:
    from k3conformance.checks.contract_known import known_disagreement, load_known, reading_parser

    row = load_known()[0]
    name, version = row.parser.split(" ")
    info = {"get_server_info": {"k3conformance_parser": {"name": name, "version": version}}}
    assert reading_parser(info) == row.parser
    assert known_disagreement(reading_parser(info), row.cell, row.clause) == row.note
    assert known_disagreement(f"{name} 0.0.0", row.cell, row.clause) is None  # another version: judged as any
    assert reading_parser({"props": {}}) is None  # a real server says nothing: nothing is excused
    assert known_disagreement(None, row.cell, row.clause) is None
