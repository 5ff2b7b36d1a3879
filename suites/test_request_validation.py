"""Request validation: invalid requests get HTTP 400 with an error body, not 500, not 200.
Logic: `k3conformance/checks/request_validation.py`."""

from __future__ import annotations

from typing import Any

import pytest

from k3conformance import Probe, ProbeResult
from k3conformance.checks.request_validation import check_invalid_request_rejected

SUITE = "request_validation"
MODES = ("plain", "stream")
QUESTION = {"role": "user", "content": "What is the weather in Paris today?"}


def _tool(name: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": "Current weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }


PRIOR_CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "functions.get_weather:0",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
        }
    ],
}

# case id -> (what is wrong, the request)
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "duplicate-tool-names": (
        "two tools with the same name",
        {"messages": [QUESTION], "tools": [_tool("get_weather"), _tool("get_weather")]},
    ),
    "invalid-tool-name": (
        "a tool name with spaces and punctuation",
        {"messages": [QUESTION], "tools": [_tool("get weather!")]},
    ),
    "tool-message-without-id": (
        "a tool message without tool_call_id",
        {
            "messages": [QUESTION, PRIOR_CALL, {"role": "tool", "content": "18 degrees, sunny"}],
            "tools": [_tool("get_weather")],
        },
    ),
    "invalid-tool-choice": (
        "tool_choice 'sometimes'",
        {"messages": [QUESTION], "tools": [_tool("get_weather")], "tool_choice": "sometimes"},
    ),
    "required-without-tools": (
        "tool_choice 'required' with no tools",
        {"messages": [QUESTION], "tool_choice": "required"},
    ),
    "required-with-empty-tools": (
        "tool_choice 'required' with an empty tools list",
        {"messages": [QUESTION], "tools": [], "tool_choice": "required"},
    ),
    "named-tool-not-declared": (
        "a named tool_choice for a tool that is not declared",
        {
            "messages": [QUESTION],
            "tools": [_tool("get_weather")],
            "tool_choice": {"type": "function", "function": {"name": "get_time"}},
        },
    ),
}

PROBES = [
    Probe(
        SUITE,
        case,
        requests={mode: {**request, "stream": mode == "stream"} for mode in MODES},
        samples=1,
        max_tokens=1024,
        status_errors_are_results=True,
    )
    for case, (_, request) in CASES.items()
]


@pytest.mark.parametrize("probe", PROBES, ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_invalid_request_rejected(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    check_invalid_request_rejected(k3_result.outcome(mode), CASES[probe.item][0], mode)
