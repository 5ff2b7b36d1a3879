"""Structured output: `response_format` with a JSON schema is honoured. Logic:
`k3conformance/checks/structured_output.py`."""

from __future__ import annotations

from typing import Any

import pytest

from k3conformance import Probe, ProbeResult, load_fixture
from k3conformance.checks import structured_output as checks

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
    checks.check_response_format_json_schema(k3_result.completion(mode), SCHEMAS[probe.item], mode)


# Vendor mode: Moonshot's API writes structured output as compact JSON, with no newline or tab
# (KVV test_response_format_with); open-source grammars may allow any whitespace, which is
# still valid JSON, so only --k3-vendor checks it.
@pytest.mark.k3_vendor
@pytest.mark.parametrize("probe", PROBES, ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_json_schema_output_compact(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    checks.check_json_schema_output_compact(k3_result.completion(mode), mode)


# The other response_format modes (Kimi's API documents text, json_object and json_schema;
# json_schema strict false guarantees only valid JSON), on the first item's prompt.
FIRST = FIXTURE.items[0]
OTHER_FORMATS: dict[str, dict[str, Any]] = {
    "text": {"type": "text"},
    "json-object": {"type": "json_object"},
    "json-schema-non-strict": {
        "type": "json_schema",
        "json_schema": {"name": FIRST["id"].replace("-", "_"), "schema": FIRST["schema"], "strict": False},
    },
}
FORMATS = Probe(
    SUITE,
    "response-format-modes",
    requests={
        f"{name}-{mode}": {
            "messages": [{"role": "user", "content": f"{FIRST['prompt']} Answer in JSON."}],
            "response_format": response_format,
            "stream": mode == "stream",
        }
        for name, response_format in OTHER_FORMATS.items()
        for mode in MODES
    },
    samples=1,
    max_tokens=MAX_TOKENS,
    data=FIXTURE.provenance(),
)
formats = pytest.mark.parametrize("probe", [FORMATS], ids=str)


@formats
@pytest.mark.parametrize("mode", MODES)
def test_response_format_text(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    checks.check_response_format_text(k3_result.completion(f"text-{mode}"), mode)


@formats
@pytest.mark.parametrize("mode", MODES)
def test_response_format_json_object(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    checks.check_response_format_json_object(k3_result.completion(f"json-object-{mode}"), mode)


@formats
@pytest.mark.parametrize("mode", MODES)
def test_response_format_json_schema_non_strict(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    checks.check_response_format_json_schema_non_strict(k3_result.completion(f"json-schema-non-strict-{mode}"), mode)
