"""Known disagreements of real parsers with the contract, cell by cell and clause by clause.

The contract matrix (suites/test_contract.py) runs through real parsers as well as ours: the
reference deployment's raw K3 output read by SGLang's, vLLM's or llama.cpp's own K3 parser
(`reference:tp8+PARSER`). Where a parser version is known to break a clause at a cell, the
file `fixtures/contract/known_disagreements.json` says so, as the parser corpus does for its
cases (`known_disagreements`, checks/parsers.py), and the check is a strict xfail there: a
version that fixes it shows up, a new disagreement fails. The semantics of the contract are
never changed to let a parser pass; what it does instead is recorded here and in
docs/api-contract.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from k3conformance.datasets.bundled import fixtures_dir


@dataclass(frozen=True)
class KnownDisagreement:
    parser: str  # "NAME VERSION", as the reference deployment reports the parser it reads with
    cell: str  # the cell's id (checks/contract.cell_id)
    clause: str
    note: str  # what the parser does instead, and why


def known_path() -> Path:
    return fixtures_dir() / "contract" / "known_disagreements.json"


def load_known(path: Path | None = None) -> list[KnownDisagreement]:
    document = json.loads((path or known_path()).read_text(encoding="utf-8"))
    return [
        KnownDisagreement(str(row["parser"]), str(row["cell"]), str(row["clause"]), str(row["note"]))
        for row in document["disagreements"]
    ]


@cache
def _by_key() -> Mapping[tuple[str, str, str], str]:
    return {(row.parser, row.cell, row.clause): row.note for row in load_known()}


def reading_parser(server_info: Mapping[str, Any]) -> str | None:
    """ "NAME VERSION" of the parser the reference deployment reads its raw output with (its
    `/get_server_info`), or None for a server that does not say (a real deployment)."""
    info = server_info.get("get_server_info")
    parser = info.get("k3conformance_parser") if isinstance(info, Mapping) else None
    if not isinstance(parser, Mapping):
        return None
    return f"{parser.get('name')} {parser.get('version')}"


def known_disagreement(parser: str | None, cell: str, clause: str) -> str | None:
    """How `parser` is known to break `clause` at `cell`, or None."""
    return None if parser is None else _by_key().get((parser, cell, clause))
