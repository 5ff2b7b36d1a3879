"""K3's API contract as a matrix: every cell of a pairwise covering design over six request
settings (stream, thinking, tool choice, ending, history, load) obeys every clause of the
contract table (docs/api-contract.md#the-contract-as-a-table). Logic and table:
`k3conformance/checks/contract.py`.

Each cell is one conversation. An ending other than a natural stop is provoked by mechanism,
never assumed: a first request of the same cell ends naturally, and the cell's request repeats
it with max_tokens sized from what that one generated (half-way through its reasoning, or
through what follows), or with a stop sequence taken from its answer. A cell under load sends
its request LOAD_COPIES times at once, holding every request slot of the process meanwhile so
that the load is its own (`Probe.exclusive`, as the load lane does); every copy is judged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from k3conformance import Completion, Exchange, Probe, ProbeResult
from k3conformance.checks import contract as checks
from k3conformance.checks.contract_known import known_disagreement, reading_parser
from k3conformance.endpoint.resolved import ResolvedEndpoint
from k3conformance.endpoint.url import is_reference, parse_reference_profile
from k3conformance.plugin import settings_of
from k3conformance.probes.request_body import thinking_fields
from k3conformance.reference.profiles import get_profile
from k3conformance.xtml.parsers import WHOLE_ONLY_PARSER_NAMES

SUITE = "contract"
MAX_TOKENS = 8192
# More than any server batches alone, and above the 6 streams from which the load faults of
# the reference deployment's profiles act (reference/faults.py LOAD_FAULT_STREAMS).
LOAD_COPIES = 8
# Two calls where a tool is called (the tool_calls fixture's parallel item): a budget that runs
# out in the second call's arguments leaves the first whole, which must survive (Dynamo PR 8208).
QUESTION = "In parallel, get the weather forecast for Oslo and for Lisbon, one call per city."
EARLIER_QUESTION = "Which city should I visit in spring?"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "get_time",
            "description": "The current time in a time zone.",
            "parameters": {
                "type": "object",
                "properties": {"timezone": {"type": "string"}},
                "required": ["timezone"],
            },
        },
    },
]
NAMED_TOOL = "get_time"  # not the tool the question asks for: a named choice must still win
TOOL_CHOICE: Mapping[str, Any] = {
    "auto": "auto",
    "required": "required",
    "named": {"type": "function", "function": {"name": NAMED_TOOL}},
    "none-with-tools": "none",
}
HISTORY: Mapping[str, list[dict[str, Any]]] = {
    "first": [],
    "after-tool-result": [
        {"role": "user", "content": QUESTION},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "functions.get_weather:0",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18 degrees, light rain"},
    ],
    "after-reasoning": [
        {"role": "user", "content": EARLIER_QUESTION},
        {
            "role": "assistant",
            "content": "Kyoto, for the cherry blossoms.",
            "reasoning_content": "Spring suggests cherry blossoms; Kyoto is the classic choice.",
        },
    ],
}


def cell_request(cell: Mapping[str, str], think_mode: str) -> dict[str, Any]:
    """The cell's request without its ending: its history, question, tools, thinking and stream."""
    history = HISTORY[cell["history"]]
    # After a tool result the turn continues it; otherwise the question is the last message.
    messages = (
        [*history] if cell["history"] == "after-tool-result" else [*history, {"role": "user", "content": QUESTION}]
    )
    body: dict[str, Any] = {"messages": messages, "stream": cell["stream"] == "on"}
    if cell["thinking"] == "off":
        body.update(thinking_fields(think_mode, enabled=False))
    else:
        body.update(thinking_fields(think_mode, effort=cell["thinking"]))
    if cell["tools"] != "none-offered":
        body["tools"] = TOOLS
        body["tool_choice"] = TOOL_CHOICE[cell["tools"]]
    return body


def _conversation(cell: Mapping[str, str]) -> Any:
    async def converse(exchange: Exchange) -> None:
        body = cell_request(cell, exchange.settings.think_mode)
        ending = cell["ending"]
        if ending != "stop":
            first = await exchange.send("first", body)
            if not isinstance(first, Completion):
                return
            if ending == "stop-sequence":
                stop = checks.stop_word_for(first)
                exchange.note("stop", stop)
                if stop is None:
                    return
                body = {**body, "stop": [stop]}
            else:
                budget = checks.budget_for(ending, first)
                exchange.note("max_tokens", budget)
                exchange.note("whole_calls_before_cut", checks.whole_calls_before_cut(ending, first))
                if budget is None:
                    return
                body = {**body, "max_tokens": budget}
        copies = LOAD_COPIES if cell["load"] == "many" else 1
        await asyncio.gather(*(exchange.send(f"final-{copy}", body) for copy in range(copies)))

    return converse


CELLS = checks.design()
PROBES = [
    Probe(
        SUITE,
        checks.cell_id(cell),
        conversation=_conversation(cell),
        samples=1,
        max_tokens=MAX_TOKENS,
        thinking_as_given=True,
        exclusive=cell["load"] == "many",
        kind=checks.cell_id(cell),
        data={"cell": cell},
    )
    for cell in CELLS
]


def observed(probe: Probe, result: ProbeResult) -> checks.Observed:
    """The cell's responses. Where its ending could not be provoked (a first answer too short
    to cut, no word of it to stop at), the first response is judged, as the natural end it was:
    a fault that empties the answer must fail a clause, not go unjudged."""
    cell: Mapping[str, str] = probe.data["cell"]
    sample = result.samples[0]
    finals = sorted(step for step in sample.outcomes if step.startswith("final-"))
    if not finals:
        return checks.Observed(
            cell=cell, completions=[result.completion("first")], named_tool=NAMED_TOOL, provoked=False
        )
    return checks.Observed(
        cell=cell,
        completions=[result.completion(step) for step in finals],
        max_tokens=sample.notes.get("max_tokens"),
        stop=sample.notes.get("stop"),
        named_tool=NAMED_TOOL,
        whole_calls_before_cut=sample.notes.get("whole_calls_before_cut", 0),
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each test_<clause> at the cells where its clause applies (the table's "where"). Where the
    reference deployment reads its output with a parser that reads whole outputs only
    (llama.cpp's), the streamed cells are not applicable: skipped, saying why, and never sent."""
    clause = metafunc.definition.name.removeprefix("test_")
    if clause not in checks.CLAUSE_BY_ID or "probe" not in metafunc.fixturenames:
        return
    whole_only = _whole_only_parser(settings_of(metafunc.config).endpoint)
    params = []
    for probe in (p for p in PROBES if checks.applies(clause, p.data["cell"])):
        if whole_only is not None and probe.data["cell"]["stream"] == "on":
            why = f"not applicable through {whole_only}'s parser: it reads whole outputs only (docs/api-contract.md)"
            # The cell's id in place of its probe: a skipped test's requests are not sent.
            params.append(pytest.param(str(probe), id=str(probe), marks=pytest.mark.skip(reason=why)))
        else:
            params.append(pytest.param(probe, id=str(probe)))
    metafunc.parametrize("probe", params)


def _whole_only_parser(endpoint: str) -> str | None:
    if not is_reference(endpoint):
        return None
    parser = get_profile(parse_reference_profile(endpoint)).parser
    return parser if parser in WHOLE_ONLY_PARSER_NAMES else None


def _known_as_xfail(request: pytest.FixtureRequest, probe: Probe, endpoint: ResolvedEndpoint) -> None:
    """A disagreement recorded for the parser that read the reference's output, at this cell and
    this test's clause, makes the test a strict xfail (checks/contract_known.py)."""
    parser = reading_parser(endpoint.server_info)
    clause = request.node.originalname.removeprefix("test_")
    known = known_disagreement(parser, checks.cell_id(probe.data["cell"]), clause)
    if known is not None:
        request.node.add_marker(pytest.mark.xfail(reason=f"{parser}: {known}", strict=True))


def test_finish_reason_as_ended(
    request: pytest.FixtureRequest, probe: Probe, k3_result: ProbeResult, k3_endpoint: ResolvedEndpoint
) -> None:
    _known_as_xfail(request, probe, k3_endpoint)
    checks.check_finish_reason_as_ended(observed(probe, k3_result))


def test_reasoning_where_thinking_says(
    request: pytest.FixtureRequest, probe: Probe, k3_result: ProbeResult, k3_endpoint: ResolvedEndpoint
) -> None:
    _known_as_xfail(request, probe, k3_endpoint)
    checks.check_reasoning_where_thinking_says(observed(probe, k3_result))


def test_answer_in_content(
    request: pytest.FixtureRequest, probe: Probe, k3_result: ProbeResult, k3_endpoint: ResolvedEndpoint
) -> None:
    _known_as_xfail(request, probe, k3_endpoint)
    checks.check_answer_in_content(observed(probe, k3_result))


def test_tool_calls_match_finish(
    request: pytest.FixtureRequest, probe: Probe, k3_result: ProbeResult, k3_endpoint: ResolvedEndpoint
) -> None:
    _known_as_xfail(request, probe, k3_endpoint)
    checks.check_tool_calls_match_finish(observed(probe, k3_result))


def test_no_markup_in_fields(
    request: pytest.FixtureRequest, probe: Probe, k3_result: ProbeResult, k3_endpoint: ResolvedEndpoint
) -> None:
    _known_as_xfail(request, probe, k3_endpoint)
    checks.check_no_markup_in_fields(observed(probe, k3_result))


def test_usage_adds_up(
    request: pytest.FixtureRequest, probe: Probe, k3_result: ProbeResult, k3_endpoint: ResolvedEndpoint
) -> None:
    _known_as_xfail(request, probe, k3_endpoint)
    checks.check_usage_adds_up(observed(probe, k3_result))


def test_calls_whole(
    request: pytest.FixtureRequest, probe: Probe, k3_result: ProbeResult, k3_endpoint: ResolvedEndpoint
) -> None:
    _known_as_xfail(request, probe, k3_endpoint)
    checks.check_calls_whole(observed(probe, k3_result))


def test_stream_framed(
    request: pytest.FixtureRequest, probe: Probe, k3_result: ProbeResult, k3_endpoint: ResolvedEndpoint
) -> None:
    _known_as_xfail(request, probe, k3_endpoint)
    checks.check_stream_framed(observed(probe, k3_result))
