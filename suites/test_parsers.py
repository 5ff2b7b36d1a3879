"""Parsers: every available K3 parser (ours, SGLang's own when installed) reads the corpus of
raw K3 outputs (fixtures/parsers/corpus.json), whole, in seeded streaming steps and one
character at a time, and must make of each the OpenAI message the corpus expects.

No endpoint is involved: this is what to run before upgrading SGLang, or to see what a
parser version does with K3's hard cases. Known disagreements of a parser version are
strict xfails, so a version that fixes one shows up as well.
"""

from __future__ import annotations

import pytest

from k3conformance.checks.parsers import (
    ParserCase,
    available_parsers,
    check_parser_reads_case,
    load_corpus,
    parser_modes,
)

CASES = load_corpus()
PARSERS, _MISSING = available_parsers()


def _params() -> list[object]:
    params: list[object] = []
    for case in CASES:
        for name, parser in PARSERS.items():
            for mode in parser_modes(parser):
                known = case.known_disagreement(parser, mode)
                marks = [pytest.mark.xfail(reason=known, strict=True)] if known else []
                params.append(pytest.param(name, case, mode, id=f"{name}-{case.name}-{mode}", marks=marks))
    return params


@pytest.mark.parametrize(("parser_name", "case", "mode"), _params())
def test_parser_reads_case(parser_name: str, case: ParserCase, mode: str) -> None:
    check_parser_reads_case(PARSERS[parser_name], case, mode)
