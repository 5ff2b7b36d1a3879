"""Tool-call schemas at scale: a generated corpus of tool-parameter JSON schemas (range
constraints, number formats, `$id`, nested `$defs`, keyword combinations, string formats
and patterns, arrays, closed nested objects), each sent as the one tool with
`tool_choice: "required"`; the arguments must validate against it (Draft 2020-12),
streamed and not. Logic: `k3conformance/checks/tool_schemas.py`; corpus:
`k3conformance/datasets/schema_corpus.py`.
"""

from __future__ import annotations

import pytest

from k3conformance import Probe, ProbeResult
from k3conformance.checks.tool_schemas import check_tool_call_arguments_match_schema
from k3conformance.datasets.schema_corpus import TOOL, tool_request, tool_schema_corpus

SUITE = "tool_schemas"
MODES = ("plain", "stream")
MAX_TOKENS = 4096
CORPUS = {case.id: case for case in tool_schema_corpus()}


PROBES = [
    Probe(
        SUITE,
        case.id,
        requests={mode: tool_request(case, stream=mode == "stream") for mode in MODES},
        samples=1,
        max_tokens=MAX_TOKENS,
        kind=case.family,
    )
    for case in CORPUS.values()
]


@pytest.mark.parametrize("probe", PROBES, ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_tool_call_arguments_match_schema(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    check_tool_call_arguments_match_schema(k3_result.completion(mode), TOOL, CORPUS[probe.item].schema, mode)
