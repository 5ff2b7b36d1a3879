"""Structured output: `response_format` with a JSON schema is honoured. Logic:
`k3conformance/checks/structured_output.py`."""

from __future__ import annotations

from typing import Any

import pytest

from k3conformance import Probe, ProbeResult, load_fixture
from k3conformance.checks.structured_output import check_response_format_json_schema

SUITE = "structured_output"
MODES = ("plain", "stream")
MAX_TOKENS = 8192
FIXTURE = load_fixture("structured")
SCHEMAS = {item["id"]: item["schema"] for item in FIXTURE.items}


def _request(item: dict[str, Any], mode: str) -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "content": item["prompt"]}],
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": item["id"].replace("-", "_"), "schema": item["schema"], "strict": True},
        },
        "stream": mode == "stream",
    }


PROBES = [
    Probe(
        SUITE,
        item["id"],
        requests={mode: _request(item, mode) for mode in MODES},
        samples=1,
        max_tokens=MAX_TOKENS,
        data=FIXTURE.provenance(),
    )
    for item in FIXTURE.items
]


@pytest.mark.parametrize("probe", PROBES, ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_response_format_json_schema(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    check_response_format_json_schema(k3_result.completion(mode), SCHEMAS[probe.item], mode)
