"""Prompt-token accuracy: `usage.prompt_tokens` matches what the server's own tokenizer
endpoint counts for the same request, streamed and not, with and without tools (global
and dynamic), with a response format and a tool-call history. Logic:
`k3conformance/checks/prompt_tokens.py`.

Where the server has no tokenizer endpoint the checks are skipped, saying so.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from k3conformance import Exchange, Probe, ProbeResult, RequestError, load_fixture
from k3conformance.checks.prompt_tokens import check_prompt_tokens_match_tokenizer

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
        pytest.skip(f"the server has no tokenizer endpoint (POST /tokenize): {tokenized.describe()}")
    check_prompt_tokens_match_tokenizer(k3_result.completion(mode), tokenized, f"{probe.item}, {mode}")
