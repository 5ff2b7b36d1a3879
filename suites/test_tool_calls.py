"""Tool calls: what agents depend on, checked streamed and not, on authored cases
(`fixtures/tool_calls.json`). Logic: `k3conformance/checks/tool_calls.py` (one `check_Y` per
`test_Y`) and `k3conformance/scoring/call_matching.py`. The BFCL subset is its own suite,
`suites/test_bfcl.py`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from k3conformance import Completion, Exchange, Probe, ProbeResult, load_fixture
from k3conformance.checks import tool_calls as checks

SUITE = "tool_calls"
MODES = ("plain", "stream")
MAX_TOKENS = 16384
AUTHORED = load_fixture("tool_calls")
TOOLS: Mapping[str, dict[str, Any]] = AUTHORED.extra["tools"]
CALLING = ("simple", "parallel", "edge", "named")


def _tools_of(item: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [TOOLS[name] for name in item["tools"]]


def _request(item: Mapping[str, Any], mode: str, **extra: Any) -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "content": item["prompt"]}],
        "tools": _tools_of(item),
        "stream": mode == "stream",
        **extra,
    }


def _named_choice(item: Mapping[str, Any]) -> str:
    """A declared tool the prompt does not ask for: ignoring the choice then shows."""
    wanted = {call["name"] for call in item["expected_calls"]}
    return str(next(name for name in item["tools"] if name not in wanted))


def _calling_probe(item: Mapping[str, Any]) -> Probe:
    requests: dict[str, dict[str, Any]] = {}
    for mode in MODES:
        requests[mode] = _request(item, mode)
        requests[f"none-{mode}"] = _request(item, mode, tool_choice="none")
        no_tools = _request(item, mode)
        del no_tools["tools"]
        requests[f"no-tools-{mode}"] = no_tools
        if item["category"] == "named":
            choice = {"type": "function", "function": {"name": _named_choice(item)}}
            requests[f"named-{mode}"] = _request(item, mode, tool_choice=choice)
    return Probe(
        SUITE,
        item["id"],
        requests=requests,
        samples=1,
        max_tokens=MAX_TOKENS,
        kind=item["category"],
        data=AUTHORED.provenance(),
    )


def _irrelevance_probe(item: Mapping[str, Any]) -> Probe:
    requests = {}
    for mode in MODES:
        requests[mode] = _request(item, mode)
        requests[f"required-{mode}"] = _request(item, mode, tool_choice="required")
    return Probe(
        SUITE,
        item["id"],
        requests=requests,
        samples=checks.IRRELEVANCE_SAMPLES,
        max_tokens=MAX_TOKENS,
        data=AUTHORED.provenance(),
    )


def _round_trip(item: Mapping[str, Any]) -> Probe:
    async def conversation(exchange: Exchange) -> None:
        for mode in MODES:
            await _round_trip_turns(exchange, item, mode)

    return Probe(
        SUITE, item["id"], conversation=conversation, samples=1, max_tokens=MAX_TOKENS, data=AUTHORED.provenance()
    )


async def _round_trip_turns(exchange: Exchange, item: Mapping[str, Any], mode: str) -> None:
    """Turn 1 calls; the results go back and turn 2 is made to call again (`required`), so
    ids must stay unique across turns; turn 3 answers from the results."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": item["prompt"]}]
    for turn, choice in ((1, "auto"), (2, "required"), (3, "auto")):
        outcome = await exchange.send(
            f"{mode}-turn{turn}",
            {"messages": messages, "tools": _tools_of(item), "tool_choice": choice, "stream": mode == "stream"},
        )
        if turn == 3 or not isinstance(outcome, Completion) or not outcome.tool_calls:
            return
        messages = [
            *messages,
            outcome.as_history_message(),
            *(
                {"role": "tool", "tool_call_id": call["id"], "content": item["tool_result"]}
                for call in outcome.tool_calls
            ),
        ]


ITEMS = {item["id"]: item for item in AUTHORED.items}
CALLING_PROBES = [_calling_probe(item) for item in AUTHORED.items if item["category"] in CALLING]
PARALLEL = [probe for probe in CALLING_PROBES if ITEMS[probe.item]["category"] == "parallel"]
NAMED = [probe for probe in CALLING_PROBES if ITEMS[probe.item]["category"] == "named"]
IRRELEVANCE = [_irrelevance_probe(item) for item in AUTHORED.items if item["category"] == "irrelevance"]
ROUND_TRIPS = [_round_trip(item) for item in AUTHORED.items if item["category"] == "round_trip"]

modes = pytest.mark.parametrize("mode", MODES)
calling = pytest.mark.parametrize("probe", CALLING_PROBES, ids=str)


def _declared(item: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: TOOLS[name] for name in item["tools"]}


@calling
@modes
def test_finish_reason_matches_tool_calls(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    checks.check_finish_reason_matches_tool_calls(k3_result.completion(mode), mode)


@calling
@modes
def test_arguments_match_schema(probe: Probe, mode: str, k3_result: ProbeResult, k3_metrics: dict[str, float]) -> None:
    report = checks.argument_report(k3_result.completion(mode), _declared(ITEMS[probe.item]))
    k3_metrics.update(calls=report.calls, valid_calls=report.valid)
    checks.check_arguments_match_schema(report, mode)


@calling
@modes
def test_calls_match_expected(probe: Probe, mode: str, k3_result: ProbeResult, k3_metrics: dict[str, float]) -> None:
    completion = k3_result.completion(mode)
    k3_metrics["trigger_tp" if completion.tool_calls else "trigger_fn"] = 1
    checks.check_calls_match_expected(completion, ITEMS[probe.item]["expected_calls"], mode)


@calling
@modes
def test_tool_call_ids(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    checks.check_tool_call_ids(k3_result.completion(mode), mode)


@pytest.mark.parametrize("probe", PARALLEL, ids=str)
@modes
def test_parallel_calls(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    checks.check_parallel_calls(k3_result.completion(mode), ITEMS[probe.item]["expected_calls"], mode)


@calling
def test_streaming_matches_non_streaming(probe: Probe, k3_result: ProbeResult) -> None:
    checks.check_streaming_matches_non_streaming(k3_result.completion("plain"), k3_result.completion("stream"))


@calling
@modes
def test_tool_choice_none(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    checks.check_tool_choice_none(k3_result.completion(f"none-{mode}"), mode)


@pytest.mark.parametrize("probe", IRRELEVANCE, ids=str)
@modes
def test_tool_choice_required(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    checks.check_tool_choice_required(k3_result.completion(f"required-{mode}"), mode)


@pytest.mark.parametrize("probe", NAMED, ids=str)
@modes
def test_tool_choice_named(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    checks.check_tool_choice_named(k3_result.outcome(f"named-{mode}"), _named_choice(ITEMS[probe.item]), mode)


@pytest.mark.parametrize("probe", IRRELEVANCE, ids=str)
@modes
def test_irrelevant_prompt_makes_no_call(
    probe: Probe, mode: str, k3_result: ProbeResult, k3_metrics: dict[str, float]
) -> None:
    samples = k3_result.completions(mode)
    k3_metrics["trigger_fp"] = sum(bool(completion.tool_calls) for completion in samples)
    checks.check_irrelevant_prompt_makes_no_call(samples, mode)


@calling
@modes
def test_no_tool_markup_in_content(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    for step, context in (
        (mode, "tools declared"),
        (f"none-{mode}", "tool_choice 'none'"),
        (f"no-tools-{mode}", "no tools declared"),
    ):
        checks.check_no_tool_markup_in_content(k3_result.completion(step), f"{context}, {mode}")


@pytest.mark.parametrize("probe", ROUND_TRIPS, ids=str)
@modes
def test_round_trip_uses_tool_result(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    turns = [
        k3_result.completion(f"{mode}-turn{turn}")
        for turn in (1, 2, 3)
        if f"{mode}-turn{turn}" in k3_result.samples[0].outcomes
    ]
    checks.check_round_trip_uses_tool_result(turns, ITEMS[probe.item]["answer_contains"], mode)


# --- K3's dynamic tools: declared inside system messages (messages[].tools) ----------
# A K3 API feature (Kimi-Vendor-Verifier README, tests/k3_features/test_dynamic_tools.py;
# SGLang 0.5.23 adds them to the request's tools). Requests go out as raw JSON, so the
# non-standard field reaches the server.
DYNAMIC_PROMPT = "What is the weather in Beijing right now? Look it up with a tool."
WEATHER = TOOLS["get_weather"]


# The weather tool with its parameters nested one object deeper (KVV's nested-schema case).
NESTED_WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": WEATHER["function"]["description"],
        "parameters": {
            "type": "object",
            "properties": {
                "location": {
                    "type": "object",
                    "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
                    "required": ["city"],
                }
            },
            "required": ["location"],
        },
    },
}
SYSTEM_PROMPT = {"role": "system", "content": "You are a helpful assistant."}
USER_TURN = {"role": "user", "content": DYNAMIC_PROMPT}


def _declaring(*tools: Mapping[str, Any]) -> dict[str, Any]:
    return {"role": "system", "content": "", "tools": list(tools)}


# Where and how the weather tool is declared, after KVV's positive dynamic-tool cases: each
# variant is a place a server's handling of messages[].tools can miss it.
DYNAMIC_VARIANTS: dict[str, tuple[str, list[dict[str, Any]], Mapping[str, Any]]] = {
    "only-dynamic": ("only dynamic tools", [SYSTEM_PROMPT, _declaring(WEATHER), USER_TURN], WEATHER),
    "with-global": ("dynamic and global tools", [SYSTEM_PROMPT, _declaring(WEATHER), USER_TURN], WEATHER),
    "last-message": ("declared after the user turn", [SYSTEM_PROMPT, USER_TURN, _declaring(WEATHER)], WEATHER),
    "three-in-one": (
        "three tools in one message",
        [_declaring(TOOLS["send_email"], WEATHER, TOOLS["track_package"]), USER_TURN],
        WEATHER,
    ),
    "two-messages": (
        "two messages with distinct tools",
        [_declaring(TOOLS["send_email"]), _declaring(WEATHER), USER_TURN],
        WEATHER,
    ),
    "nested-schema": ("a nested parameter schema", [_declaring(NESTED_WEATHER), USER_TURN], NESTED_WEATHER),
    "strict-false": (
        "declared with strict false",
        [_declaring({"type": "function", "function": {**WEATHER["function"], "strict": False}}), USER_TURN],
        WEATHER,
    ),
}


def _dynamic_request(variant: str, mode: str) -> dict[str, Any]:
    _, messages, _ = DYNAMIC_VARIANTS[variant]
    request: dict[str, Any] = {"messages": messages, "tool_choice": "required", "stream": mode == "stream"}
    if variant == "with-global":
        request["tools"] = [TOOLS["send_email"]]
    return request


DYNAMIC = Probe(
    SUITE,
    "dynamic-tools",
    requests={f"{variant}-{mode}": _dynamic_request(variant, mode) for variant in DYNAMIC_VARIANTS for mode in MODES},
    samples=1,
    max_tokens=MAX_TOKENS,
    data=AUTHORED.provenance(),
)


@pytest.mark.parametrize("probe", [DYNAMIC], ids=str)
@modes
def test_dynamic_tools_called(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    for variant, (context, _, tool) in DYNAMIC_VARIANTS.items():
        checks.check_dynamic_tools_called(k3_result.completion(f"{variant}-{mode}"), tool, f"{context}, {mode}")


# --- histories written by other clients ----------------------------------------------
# Other id formats (OpenAI's call_…, Anthropic-style toolu_…), empty and list content in
# assistant turns: all valid, and the answer must use the tool results.
OTHER_CLIENT_ITEM = next(item for item in AUTHORED.items if item["category"] == "round_trip")


def _other_client_history(mode: str) -> dict[str, Any]:
    call = OTHER_CLIENT_ITEM["expected_calls"][0]
    arguments = json.dumps(call["arguments"], ensure_ascii=False)
    calls = [
        {"id": call_id, "type": "function", "function": {"name": call["name"], "arguments": arguments}}
        for call_id in ("call_9f3b2c1d7e", "toolu_01A09q90qw90lq917835")
    ]
    return {
        "messages": [
            {"role": "user", "content": OTHER_CLIENT_ITEM["prompt"]},
            {"role": "assistant", "content": [{"type": "text", "text": ""}], "tool_calls": calls[:1]},
            {"role": "tool", "tool_call_id": calls[0]["id"], "content": OTHER_CLIENT_ITEM["tool_result"]},
            {"role": "assistant", "content": "", "tool_calls": calls[1:]},
            {"role": "tool", "tool_call_id": calls[1]["id"], "content": OTHER_CLIENT_ITEM["tool_result"]},
        ],
        "tools": _tools_of(OTHER_CLIENT_ITEM),
        "stream": mode == "stream",
    }


OTHER_CLIENT = Probe(
    SUITE,
    "other-client-history",
    requests={mode: _other_client_history(mode) for mode in MODES},
    samples=1,
    max_tokens=MAX_TOKENS,
    data=AUTHORED.provenance(),
)


@pytest.mark.parametrize("probe", [OTHER_CLIENT], ids=str)
@modes
def test_history_from_other_clients(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    checks.check_history_from_other_clients(k3_result.completion(mode), OTHER_CLIENT_ITEM["answer_contains"], mode)
