"""Fixed prompt-token counts for K3's chat template: the second source of the prompt-token
checks, for servers without a tokenizer endpoint.

The file is Kimi-Vendor-Verifier's own format (`testdata/prompt_token_cases/cases.jsonl`):
one JSON object a line with `id`, `request` (a chat completion body without `model`) and
`expected_prompt_tokens`, a count made with K3's own tokenizer. So a vendor can point
`--k3-prompt-token-cases` at KVV's file, or at counts of their own.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from k3conformance.datasets.sources import DatasetUnavailable

OPTION = "--k3-prompt-token-cases"


@dataclass(frozen=True)
class PromptTokenCase:
    id: str
    request: Mapping[str, Any]
    expected_prompt_tokens: int
    line: int


@dataclass(frozen=True)
class PromptTokenCases:
    path: Path
    sha256: str
    cases: tuple[PromptTokenCase, ...]


@cache
def load_prompt_token_cases(path: Path) -> PromptTokenCases:
    """The cases of `path`; DatasetUnavailable, saying where, for a missing file or a bad line."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise DatasetUnavailable(f"{OPTION} {path}: cannot read it ({error.strerror})") from None
    cases: list[PromptTokenCase] = []
    for number, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), start=1):
        if line.strip():
            cases.append(_case(path, number, line))
    if not cases:
        raise DatasetUnavailable(f"{OPTION} {path}: no cases (one JSON object a line expected)")
    ids = [case.id for case in cases]
    repeated = sorted({case_id for case_id in ids if ids.count(case_id) > 1})
    if repeated:
        raise DatasetUnavailable(f"{OPTION} {path}: repeated case ids: {', '.join(repeated)}")
    return PromptTokenCases(path, hashlib.sha256(raw).hexdigest(), tuple(cases))


def _case(path: Path, number: int, line: str) -> PromptTokenCase:
    where = f"{OPTION} {path}, line {number}"
    try:
        record = json.loads(line)
    except ValueError as error:
        raise DatasetUnavailable(f"{where}: not JSON ({error})") from None
    if not isinstance(record, dict):
        raise DatasetUnavailable(f"{where}: expected an object with id, request and expected_prompt_tokens")
    case_id, request, expected = record.get("id"), record.get("request"), record.get("expected_prompt_tokens")
    if not isinstance(case_id, str) or not case_id:
        raise DatasetUnavailable(f"{where}: `id` must be a non-empty string")
    if not isinstance(request, dict) or not isinstance(request.get("messages"), list):
        raise DatasetUnavailable(f"{where}: `request` must be a chat completion body with `messages`")
    if isinstance(expected, bool) or not isinstance(expected, int) or expected < 1:
        raise DatasetUnavailable(f"{where}: `expected_prompt_tokens` must be a positive integer")
    return PromptTokenCase(case_id, request, expected, number)
