"""The parser matrix: raw K3 outputs, the OpenAI message each should become, and what a
parser (ours, or a serving framework's own) makes of them, whole and streamed.

This is what a vendor runs before upgrading SGLang: it says whether the new parser version
still reads K3's format, case by case, without any endpoint. The corpus is
`fixtures/parsers/corpus.json`; `k3conformance parsers` prints the matrix and
`suites/test_parsers.py` fails on every disagreement.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from k3conformance.checks.failures import expect
from k3conformance.datasets.bundled import fixtures_dir
from k3conformance.xtml.parsers import (
    REFERENCE_PARSER_NAMES,
    Parsed,
    ParseRefused,
    ParserUnavailable,
    WireParser,
    make_parser,
)
from k3conformance.xtml.writer import token_pieces

# whole: one parse of the complete output. stream: the reference's seeded tokenizer-like steps.
# chars: one character per step, so every marker is split at every position.
MODES = ("whole", "stream", "chars")


def parser_modes(parser: WireParser) -> tuple[str, ...]:
    """The modes a parser can be run in: llama.cpp's, behind its server, reads whole outputs only."""
    modes: tuple[str, ...] = getattr(parser, "modes", MODES)
    return modes


@dataclass(frozen=True)
class ParserCase:
    name: str
    about: str
    raw: str
    tools: bool  # whether the request declared tools, so that the server runs the tool-call parser
    expected: dict[str, Any]
    # "NAME VERSION" (every mode) or "NAME VERSION MODE" -> how that parser version is known to read this case.
    known_disagreements: dict[str, str]
    # Where the case comes from: project, file and version (a corpus built by hand says so).
    source: str = ""

    def known_disagreement(self, parser: WireParser, mode: str) -> str | None:
        version = f"{parser.name} {parser.version}"
        return self.known_disagreements.get(f"{version} {mode}") or self.known_disagreements.get(version)


def corpus_path() -> Path:
    return fixtures_dir() / "parsers" / "corpus.json"


def variants_path() -> Path:
    """The generated variants (fixtures/parsers/build_variants.py), read with the corpus by default."""
    return fixtures_dir() / "parsers" / "variants.json"


def load_corpus(path: Path | None = None) -> list[ParserCase]:
    """The cases of `path`; by default the authored corpus and the generated variants."""
    paths = [path] if path is not None else [corpus_path(), variants_path()]
    cases: list[ParserCase] = []
    for each in paths:
        cases += load_corpus_document(json.loads(each.read_text(encoding="utf-8")))
    return cases


def load_corpus_document(document: dict[str, Any]) -> list[ParserCase]:
    return [
        ParserCase(
            case["name"],
            case["about"],
            case["raw"],
            bool(case["tools"]),
            case["expected"],
            dict(case.get("known_disagreements", {})),
            str(case.get("source", "")),
        )
        for case in document["cases"]
    ]


# Every parser is a column, llama.cpp's (whole outputs only) included.
MATRIX_PARSER_NAMES = REFERENCE_PARSER_NAMES


def available_parsers(names: Collection[str] = MATRIX_PARSER_NAMES) -> tuple[dict[str, WireParser], dict[str, str]]:
    """(parsers among `names` that load here, why each of the others does not)."""
    loaded: dict[str, WireParser] = {}
    missing: dict[str, str] = {}
    for name in (name for name in MATRIX_PARSER_NAMES if name in names):
        try:
            loaded[name] = make_parser(name)
        except ParserUnavailable as error:
            missing[name] = str(error)
    return loaded, missing


def parse_case(parser: WireParser, case: ParserCase, mode: str) -> dict[str, Any]:
    """The message `parser` makes of the case: reasoning, content and calls with decoded arguments;
    a parser that refuses the output gives a message of its own, `refused`, which no case expects."""
    if mode == "whole":
        try:
            parsed = parser.parse(case.raw, tools=case.tools)
        except ParseRefused as refusal:
            return {"reasoning": None, "content": None, "tool_calls": None, "refused": str(refusal)}
    else:
        stream = parser.stream(tools=case.tools)
        pieces = token_pieces(case.raw) if mode == "stream" else list(case.raw)
        steps = [stream.feed(piece) for piece in pieces] + [stream.finish()]
        parsed = Parsed(
            "".join(step.reasoning for step in steps),
            "".join(step.content for step in steps),
            tuple(call for step in steps for call in step.calls),
        )
    return {
        "reasoning": parsed.reasoning,
        "content": parsed.content,
        "tool_calls": [{"name": call.name, "arguments": _decoded(call.arguments)} for call in parsed.calls],
    }


def _decoded(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments  # shown as the string it is: not JSON is a disagreement of its own


def differences(got: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    if "refused" in got:
        return [f"refused: {got['refused']}"]
    return [
        f"{field}: expected {json.dumps(expected[field], ensure_ascii=False)}, got {json.dumps(got[field], ensure_ascii=False)}"
        for field in ("reasoning", "content", "tool_calls")
        if got[field] != expected[field]
    ]


def matrix(parsers: dict[str, WireParser], cases: list[ParserCase]) -> Iterator[tuple[ParserCase, str, str, list[str]]]:
    """(case, parser name, mode, differences) for every combination; no differences: agreement."""
    for case in cases:
        for name, parser in parsers.items():
            for mode in parser_modes(parser):
                yield case, name, mode, differences(parse_case(parser, case, mode), case.expected)


def check_parser_reads_case(parser: WireParser, case: ParserCase, mode: str) -> None:
    __tracebackhide__ = True
    found = differences(parse_case(parser, case, mode), case.expected)
    expect(
        not found,
        layer="parser",
        expected=f"{parser.name} {parser.version} to read case {case.name!r} ({case.about}; {mode}) as the corpus says",
        got="; ".join(found),
        hint="a real disagreement goes in docs/parsers.md with the parser's version; a corpus mistake in fixtures/parsers/corpus.json",
    )


@dataclass(frozen=True)
class MatrixRow:
    case: str
    parser: str  # "NAME VERSION"
    mode: str
    differences: tuple[str, ...]
    known: str | None  # the corpus's note when this parser version is known to disagree

    @property
    def verdict(self) -> str:
        if not self.differences:
            return "fixed" if self.known else "ok"
        return "known" if self.known else "DIFF"


def matrix_rows(parsers: dict[str, WireParser], cases: list[ParserCase]) -> list[MatrixRow]:
    return [
        MatrixRow(
            case.name,
            f"{parsers[name].name} {parsers[name].version}",
            mode,
            tuple(found),
            case.known_disagreement(parsers[name], mode),
        )
        for case, name, mode, found in matrix(parsers, cases)
    ]


def matrix_text(rows: list[MatrixRow], missing: dict[str, str]) -> list[str]:
    """One line per case with a verdict per parser and mode, then every disagreement spelled out."""
    columns = list(dict.fromkeys(f"{row.parser} {row.mode}" for row in rows))
    verdicts: dict[str, dict[str, str]] = {}
    for row in rows:
        verdicts.setdefault(row.case, {})[f"{row.parser} {row.mode}"] = row.verdict
    width = max(len(case) for case in verdicts)
    lines = [f"{'case':<{width}}  " + "  ".join(columns)]
    for case, by_column in verdicts.items():
        lines.append(f"{case:<{width}}  " + "  ".join(f"{by_column[column]:<{len(column)}}" for column in columns))
    for row in rows:
        if row.verdict != "ok":
            lines.append(
                f"{row.verdict}: {row.case} ({row.parser}, {row.mode}): {'; '.join(row.differences) or row.known}"
            )
    lines.extend(f"not run: {name}: {why}" for name, why in missing.items())
    return lines
