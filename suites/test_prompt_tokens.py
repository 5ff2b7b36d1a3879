"""Prompt-token accuracy: `usage.prompt_tokens` matches what the server's own tokenizer
endpoint counts for the same request, streamed and not, with and without tools (global
and dynamic), with a response format and a tool-call history. Logic:
`k3conformance/checks/prompt_tokens.py`.

Where the server has no tokenizer endpoint those checks are skipped, saying so; fixed
counts for K3's template (`--k3-prompt-token-cases FILE`, Kimi-Vendor-Verifier's format)
are the second source, checked by `test_prompt_tokens_match_constants`.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from k3conformance import (
    Exchange,
    Probe,
    ProbeResult,
    RequestError,
    Settings,
    load_fixture,
    parametrize_probes,
    settings_of,
)
from k3conformance.checks.prompt_tokens import check_prompt_tokens_match_constants, check_prompt_tokens_match_tokenizer
from k3conformance.datasets.prompt_token_cases import load_prompt_token_cases

SUITE = "prompt_tokens"
MODES = ("plain", "stream")
MAX_TOKENS = 1024
# Statuses that say the route does not exist (or is not enabled), rather than that it refused the request.
NO_ENDPOINT = (404, 405, 501)
TOOLS: dict[str, Any] = load_fixture("tool_calls").extra["tools"]
QUESTION = "What is the weather in Beijing today? Summarise it in JSON."
SUMMARY_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "temperature": {"type": "number"}, "summary": {"type": "string"}},
    "required": ["city", "temperature", "summary"],
    "additionalProperties": False,
}
HISTORY = [
    {"role": "system", "content": "You are Kimi, a helpful assistant."},
    {"role": "system", "content": "", "tools": [TOOLS["get_weather"]]},
    {"role": "user", "content": "What is the weather in Beijing today?"},
    {
        "role": "assistant",
        "content": "",
        "reasoning_content": "The user asks for the weather; I should call get_weather for Beijing.",
        "tool_calls": [
            {
                "id": "call_01abc",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Beijing"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_01abc", "content": '{"city": "Beijing", "temperature": 26}'},
    {"role": "user", "content": "Summarise today's weather in JSON."},
]

# case -> the request (without stream), after KVV's prompt-token cases
CASES: dict[str, dict[str, Any]] = {
    "plain": {"messages": [{"role": "user", "content": QUESTION}]},
    "tools": {
        "messages": [{"role": "user", "content": QUESTION}],
        "tools": [TOOLS["get_weather"], TOOLS["send_email"]],
    },
    "response-format": {
        "messages": [{"role": "user", "content": QUESTION}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "summary", "schema": SUMMARY_SCHEMA}},
    },
    "history-dynamic-tools": {
        "messages": HISTORY,
        "tools": [TOOLS["send_email"]],
        "tool_choice": "auto",
        "response_format": {"type": "json_schema", "json_schema": {"name": "summary", "schema": SUMMARY_SCHEMA}},
    },
}


def _probe(case: str) -> Probe:
    async def conversation(exchange: Exchange) -> None:
        request = CASES[case]
        counted, *_ = await asyncio.gather(
            exchange.count_prompt_tokens(request),
            *(exchange.send(mode, {**request, "stream": mode == "stream"}) for mode in MODES),
        )
        exchange.note("tokenized", counted)

    return Probe(SUITE, case, conversation=conversation, samples=1, max_tokens=MAX_TOKENS)


PROBES = [_probe(case) for case in CASES]


@pytest.mark.parametrize("probe", PROBES, ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_prompt_tokens_match_tokenizer(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    tokenized = k3_result.samples[0].notes["tokenized"]
    if isinstance(tokenized, RequestError) and tokenized.http_status in NO_ENDPOINT:
        pytest.skip(
            f"the server has no tokenizer endpoint (POST /tokenize): {tokenized.describe()}; "
            "give fixed counts with --k3-prompt-token-cases to check prompt tokens against them"
        )
    check_prompt_tokens_match_tokenizer(k3_result.completion(mode), tokenized, f"{probe.item}, {mode}")


# --- the second source: fixed counts the user provides (--k3-prompt-token-cases) --------
# KVV's own file format, so KVV's cases.jsonl works as it is. Each request is sent as
# written (its own thinking and sampling parameters), streamed and not.


def _constant_probes(settings: Settings) -> list[Probe]:
    assert settings.prompt_token_cases is not None
    loaded = load_prompt_token_cases(settings.prompt_token_cases)
    return [
        Probe(
            SUITE,
            f"constant-{case.id}",
            requests={mode: {**case.request, "stream": mode == "stream"} for mode in MODES},
            samples=1,
            max_tokens=MAX_TOKENS,
            thinking_as_given=True,
            sampling_as_given=True,
            data={"expected_prompt_tokens": case.expected_prompt_tokens, "source": f"{loaded.path}:{case.line}"},
        )
        for case in loaded.cases
    ]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if settings_of(metafunc.config).prompt_token_cases is not None:
        parametrize_probes(metafunc, "test_prompt_tokens_match_constants", _constant_probes)
    elif metafunc.definition.name == "test_prompt_tokens_match_constants":
        reason = "no fixed counts given (--k3-prompt-token-cases): prompt tokens are checked against /tokenize only"
        metafunc.parametrize("probe", [pytest.param(None, marks=pytest.mark.skip(reason=reason), id="no-constants")])


@pytest.mark.parametrize("mode", MODES)
def test_prompt_tokens_match_constants(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    if "fixture://" in json.dumps(probe.requests[mode]):
        pytest.skip("the case refers to KVV's image fixtures (fixture://), which this plugin does not materialise")
    check_prompt_tokens_match_constants(
        k3_result.completion(mode),
        probe.data["expected_prompt_tokens"],
        str(probe.data["source"]),
        f"{probe.item.removeprefix('constant-')}, {mode}",
    )
