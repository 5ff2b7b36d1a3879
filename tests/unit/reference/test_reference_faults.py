"""The reference deployment's fault profiles: each shows its one fault, and nothing else differs from tp8."""

from __future__ import annotations

import http.client
import json
import shutil
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from k3conformance.reference import RunningServer, default_fixtures_dir
from k3conformance.reference.catalogue import CONFORMANCE_FAULTS
from k3conformance.reference.faults import GUIDED_CRASH_IN_FLIGHT, PrefixCache, prefix_cache_for
from k3conformance.reference.profiles import get_profile, profiles_of_kind
from k3conformance.reference.server import start_in_thread

MODEL = "kimi-k3-simulator"
SMOKE = {
    item["id"]: item["prompt"] for item in json.loads((default_fixtures_dir() / "smoke.json").read_text())["items"]
}
PONG = SMOKE["pong"]
CAPITAL = SMOKE["capital-of-france"]
SUM = SMOKE["sum-17-25"]
FORECAST_PROMPT = "Give me the 3-day forecast for Paris."
TWO_CITIES_PROMPT = "Compare the weather in Paris and in Rome."
# Items with expected tool calls, which smoke.json does not have.
TOOL_SUITE = {
    "suite": "fault-tools",
    "items": [
        {
            "id": "forecast",
            "prompt": FORECAST_PROMPT,
            "answer": "sunny",
            "simulator": {
                "reply": "Sunny for three days.",
                "graded": False,
                "tool_calls": [{"name": "get_forecast", "arguments": {"city": "Paris", "days": 3}}],
            },
        },
        {
            "id": "two-cities",
            "prompt": TWO_CITIES_PROMPT,
            "answer": "both sunny",
            "simulator": {
                "reply": "Both are sunny.",
                "graded": False,
                "tool_calls": [
                    {"name": "get_weather", "arguments": {"city": "Paris"}},
                    {"name": "get_weather", "arguments": {"city": "Rome"}},
                ],
            },
        },
    ],
}


def function_tool(name: str, properties: dict[str, Any] | None = None) -> dict[str, Any]:
    properties = properties or {"city": {"type": "string"}}
    schema = {"type": "object", "properties": properties, "required": list(properties)}
    return {"type": "function", "function": {"name": name, "parameters": schema}}


WEATHER = function_tool("get_weather")
FORECAST = function_tool("get_forecast", {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1}})
TYPED = function_tool(
    "log_reading",
    {
        "sensor": {"type": "string"},
        "value": {"type": "number"},
        "count": {"type": "integer"},
        "ok": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "where": {"type": "object", "properties": {"room": {"type": "string"}}, "required": ["room"]},
    },
)
TOOLS = [WEATHER, FORECAST, TYPED]
DECLARED = {tool["function"]["name"] for tool in TOOLS}
# XTML types integers as "number", as SGLang's kimik3_structural_tag.py does.
FORECAST_MARKUP = (
    '<|open|>tools<|sep|><|open|>call tool="get_forecast" index="1"<|sep|>'
    '<|open|>argument key="city" type="string"<|sep|>Paris<|close|>argument<|sep|>'
    '<|open|>argument key="days" type="number"<|sep|>3<|close|>argument<|sep|>'
    "<|close|>call<|sep|><|close|>tools<|sep|>"
)
# The four invalid requests that a sloppy validator gets wrong.
MALFORMED: dict[str, dict[str, Any]] = {
    "duplicate-tool-names": {"tools": [WEATHER, WEATHER]},
    "invalid-tool-name": {"tools": [function_tool("bad name!")]},
    "tool-message-without-id": {"messages": [{"role": "user", "content": PONG}, {"role": "tool", "content": "42"}]},
    "invalid-tool-choice": {"tools": TOOLS, "tool_choice": "sometimes"},
}


def user(prompt: str, **fields: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": prompt}], **fields}


# --- servers and HTTP ------------------------------------------------------------------


class Servers:
    """One reference deployment per profile, started on first use."""

    def __init__(self, fixtures_dir: Path) -> None:
        self._fixtures_dir = fixtures_dir
        self._running: dict[str, RunningServer] = {}

    def __getitem__(self, profile: str) -> RunningServer:
        if profile not in self._running:
            self._running[profile] = start_in_thread(get_profile(profile), fixtures_dir=self._fixtures_dir)
        return self._running[profile]

    def stop_all(self) -> None:
        for server in self._running.values():
            server.stop()


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    directory = tmp_path_factory.mktemp("fixtures")
    shutil.copy(default_fixtures_dir() / "smoke.json", directory / "smoke.json")
    (directory / "fault-tools.json").write_text(json.dumps(TOOL_SUITE))
    running = Servers(directory)
    yield running
    running.stop_all()


def post(server: RunningServer, body: dict[str, Any]) -> tuple[int, bytes]:
    request = urllib.request.Request(
        server.url + "/chat/completions",
        data=json.dumps({"model": MODEL, **body}).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def completion(server: RunningServer, body: dict[str, Any]) -> dict[str, Any]:
    status, raw = post(server, {**body, "stream": False})
    assert status == 200, raw
    return json.loads(raw)  # type: ignore[no-any-return]


def chunks(server: RunningServer, body: dict[str, Any], include_usage: bool = True) -> list[dict[str, Any]]:
    fields: dict[str, Any] = {"stream": True}
    if include_usage:
        fields["stream_options"] = {"include_usage": True}
    status, raw = post(server, {**body, **fields})
    assert status == 200, raw
    frames = [frame.removeprefix("data: ") for frame in raw.decode().split("\n\n") if frame]
    assert frames[-1] == "[DONE]"
    return [json.loads(frame) for frame in frames[:-1]]


def deltas(stream: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [chunk["choices"][0]["delta"] for chunk in stream if chunk["choices"]]


def without_identity(value: dict[str, Any]) -> dict[str, Any]:
    # Response id and creation time are the only parts of an answer that differ between servers.
    return {key: field for key, field in value.items() if key not in ("id", "created")}


@dataclass(frozen=True)
class Answer:
    """One answer as a client reads it, from either mode; tool calls are merged by index as a client does."""

    reasoning: str | None  # the `reasoning_content` field
    content: str | None
    tool_calls: list[dict[str, Any]] | None  # None when the field is null or never streamed
    finish_reasons: list[str]
    usage: dict[str, Any] | None


def answer(server: RunningServer, body: dict[str, Any], stream: bool) -> Answer:
    if not stream:
        whole = completion(server, body)
        choice = whole["choices"][0]
        message = choice["message"]
        return Answer(
            message.get("reasoning_content"),
            message["content"],
            message["tool_calls"],
            [choice["finish_reason"]],
            whole["usage"],
        )
    reasoning: str | None = None
    content: str | None = None
    calls: dict[int, dict[str, Any]] | None = None
    finishes: list[str] = []
    usage = None
    for chunk in chunks(server, body):
        usage = chunk.get("usage") or usage
        if not chunk["choices"]:
            continue
        delta = chunk["choices"][0]["delta"]
        if delta.get("reasoning_content") is not None:
            reasoning = (reasoning or "") + delta["reasoning_content"]
        if delta.get("content") is not None:
            content = (content or "") + delta["content"]
        if "tool_calls" in delta:
            calls = _merge_calls(calls or {}, delta["tool_calls"])
        if chunk["choices"][0]["finish_reason"]:
            finishes.append(chunk["choices"][0]["finish_reason"])
    return Answer(reasoning, content, None if calls is None else list(calls.values()), finishes, usage)


def _merge_calls(calls: dict[int, dict[str, Any]], pieces: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    for piece in pieces:
        call = calls.setdefault(piece["index"], {"id": piece.get("id"), "type": piece.get("type"), "function": {}})
        function = call["function"]
        function.setdefault("name", piece["function"].get("name"))
        function["arguments"] = function.get("arguments", "") + piece["function"].get("arguments", "")
    return calls


def call_names(reply: Answer) -> list[str]:
    return [call["function"]["name"] for call in reply.tool_calls or []]


BOTH_MODES = pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])


# --- the profiles themselves -----------------------------------------------------------


def test_every_known_fault_has_its_own_profile_on_top_of_tp8() -> None:
    assert set(profiles_of_kind("conformance")) == CONFORMANCE_FAULTS
    tp8 = get_profile("tp8")
    for fault in CONFORMANCE_FAULTS:
        profile = get_profile(fault)
        assert profile.faults == {fault} and profile.base == "tp8"
        assert (profile.accuracy, profile.reasoning_words, profile.latency_s) == (
            tp8.accuracy,
            tp8.reasoning_words,
            tp8.latency_s,
        )
        assert profile.description.startswith("tp8 plus one fault: ")


def test_the_healthy_profile_keeps_no_state_across_requests() -> None:
    assert prefix_cache_for(get_profile("tp8").faults) is None
    assert isinstance(prefix_cache_for(get_profile("prefix-cache-corruption").faults), PrefixCache)


# --- each fault is present ---------------------------------------------------------------

PresenceCheck = Callable[[RunningServer, RunningServer], None]
PRESENCE_CHECKS: dict[str, PresenceCheck] = {}


def shows(fault: str) -> Callable[[PresenceCheck], PresenceCheck]:
    """Registers a check that `fault`'s server shows the fault and tp8's server does not."""

    def register(check: PresenceCheck) -> PresenceCheck:
        PRESENCE_CHECKS[fault] = check
        return check

    return register


def test_every_fault_has_a_presence_check() -> None:
    assert set(PRESENCE_CHECKS) == CONFORMANCE_FAULTS


@pytest.mark.parametrize("fault", sorted(CONFORMANCE_FAULTS))
def test_fault_is_present(servers: Servers, fault: str) -> None:
    PRESENCE_CHECKS[fault](servers[fault], servers["tp8"])


# Reasoning and the API


@shows("no-reasoning-parser")
def thinking_arrives_inline_in_content(faulty: RunningServer, healthy: RunningServer) -> None:
    reasoning = completion(healthy, user(CAPITAL))["choices"][0]["message"]["reasoning_content"]
    inline = f"<|open|>think<|sep|>{reasoning}<|close|>think<|sep|>Paris"
    message = completion(faulty, user(CAPITAL))["choices"][0]["message"]
    assert "reasoning_content" not in message and "reasoning" not in message
    assert message["content"] == inline
    streamed = answer(faulty, user(CAPITAL), stream=True)
    assert all("reasoning_content" not in delta for delta in deltas(chunks(faulty, user(CAPITAL))))
    assert (streamed.reasoning, streamed.content) == (None, inline)


@shows("reasoning-field-vllm")
def reasoning_travels_in_the_vllm_field(faulty: RunningServer, healthy: RunningServer) -> None:
    healthy_message = completion(healthy, user(CAPITAL))["choices"][0]["message"]
    message = completion(faulty, user(CAPITAL))["choices"][0]["message"]
    assert "reasoning_content" not in message
    assert message["reasoning"] == healthy_message["reasoning_content"]
    streamed = deltas(chunks(faulty, user(CAPITAL)))
    assert all("reasoning_content" not in delta for delta in streamed)
    assert "".join(delta.get("reasoning", "") for delta in streamed) == healthy_message["reasoning_content"]


@shows("message-close-leak")
def stream_ends_with_the_message_close_marker(faulty: RunningServer, healthy: RunningServer) -> None:
    stream = chunks(faulty, user(CAPITAL))
    finish = next(i for i, chunk in enumerate(stream) if chunk["choices"] and chunk["choices"][0]["finish_reason"])
    assert stream[finish - 1]["choices"][0]["delta"] == {"content": "<|close|>message<|sep|>"}
    assert answer(faulty, user(CAPITAL), stream=True).content == "Paris<|close|>message<|sep|>"
    assert answer(healthy, user(CAPITAL), stream=True).content == "Paris"


@shows("k2-think-tags")
def reasoning_is_wrapped_in_think_tags(faulty: RunningServer, healthy: RunningServer) -> None:
    for stream in (False, True):
        reasoning = answer(healthy, user(CAPITAL), stream).reasoning
        assert answer(faulty, user(CAPITAL), stream).reasoning == f"<think>{reasoning}</think>"


@shows("raw-stop-token")
def finish_reason_is_the_raw_stop_token(faulty: RunningServer, healthy: RunningServer) -> None:
    for stream in (False, True):
        assert answer(faulty, user(CAPITAL), stream).finish_reasons == ["stop_163586"]
        assert answer(healthy, user(CAPITAL), stream).finish_reasons == ["stop"]


@shows("empty-content")
def answer_is_swallowed_into_reasoning(faulty: RunningServer, healthy: RunningServer) -> None:
    for stream in (False, True):
        expected = answer(healthy, user(CAPITAL), stream)
        reply = answer(faulty, user(CAPITAL), stream)
        assert (reply.content, reply.finish_reasons) == ("", ["stop"])
        assert reply.reasoning == f"{expected.reasoning}\nParis"
        # The swallowed answer is counted as reasoning: usage stays consistent with what was sent.
        assert reply.usage is not None and expected.usage is not None
        assert reply.usage["completion_tokens"] == expected.usage["completion_tokens"]
        assert reply.usage["completion_tokens_details"]["reasoning_tokens"] == len(reply.reasoning.split())


@shows("length-reported-as-stop")
def truncation_is_reported_as_stop(faulty: RunningServer, healthy: RunningServer) -> None:
    truncated = user(CAPITAL, max_tokens=10)
    for stream in (False, True):
        assert answer(healthy, truncated, stream).finish_reasons == ["length"]
        reply = answer(faulty, truncated, stream)
        assert reply.finish_reasons == ["stop"] and reply.usage is not None
        assert reply.usage["completion_tokens"] == 10


@shows("effort-ignored")
def every_effort_reasons_at_max_length(faulty: RunningServer, healthy: RunningServer) -> None:
    def reasoning_tokens(server: RunningServer, effort: str) -> int:
        usage = completion(server, user(CAPITAL, reasoning_effort=effort, seed=1))["usage"]
        return int(usage["completion_tokens_details"]["reasoning_tokens"])

    assert reasoning_tokens(healthy, "low") * 4 < reasoning_tokens(healthy, "max")
    assert reasoning_tokens(faulty, "low") == reasoning_tokens(faulty, "max") == reasoning_tokens(healthy, "max")


@shows("null-reasoning-stream")
def stream_loses_reasoning_behind_null_fields(faulty: RunningServer, healthy: RunningServer) -> None:
    stream = chunks(faulty, user(CAPITAL))
    streamed = deltas(stream)
    assert all(delta["reasoning_content"] is None for delta in streamed)
    assert streamed[0] == {"role": "assistant", "reasoning_content": None}
    reply, expected = answer(faulty, user(CAPITAL), stream=True), answer(healthy, user(CAPITAL), stream=True)
    assert expected.reasoning and reply.reasoning is None
    assert (reply.content, reply.finish_reasons, reply.usage) == (expected.content, ["stop"], expected.usage)


@shows("double-finish")
def stream_finishes_twice(faulty: RunningServer, healthy: RunningServer) -> None:
    finishes = [
        (chunk["choices"][0]["finish_reason"], chunk["choices"][0]["delta"])
        for chunk in chunks(faulty, user(CAPITAL))
        if chunk["choices"] and chunk["choices"][0]["finish_reason"]
    ]
    assert finishes == [("stop", {}), ("stop", {})]
    assert answer(healthy, user(CAPITAL), stream=True).finish_reasons == ["stop"]


@shows("no-stream-usage")
def stream_has_no_usage_frame(faulty: RunningServer, healthy: RunningServer) -> None:
    assert all(chunk["choices"] and "usage" not in chunk for chunk in chunks(faulty, user(CAPITAL)))
    assert answer(faulty, user(CAPITAL), stream=True).usage is None
    assert answer(healthy, user(CAPITAL), stream=True).usage is not None


@shows("content-before-reasoning")
def stream_sends_content_before_reasoning(faulty: RunningServer, healthy: RunningServer) -> None:
    kinds = [next(iter(delta)) for delta in deltas(chunks(faulty, user(CAPITAL))) if delta]
    text = [kind for kind in kinds if kind in ("content", "reasoning_content")]
    assert text[0] == "content" and text.index("reasoning_content") > text.index("content")
    assert text == sorted(text, key=["content", "reasoning_content"].index)
    assert answer(faulty, user(CAPITAL), stream=True) == answer(healthy, user(CAPITAL), stream=True)


@shows("usage-excludes-reasoning")
def completion_tokens_leave_out_reasoning(faulty: RunningServer, healthy: RunningServer) -> None:
    for stream in (False, True):
        expected = answer(healthy, user(CAPITAL), stream).usage
        usage = answer(faulty, user(CAPITAL), stream).usage
        assert expected is not None and usage is not None
        reasoning_tokens = expected["completion_tokens_details"]["reasoning_tokens"]
        assert usage["completion_tokens_details"]["reasoning_tokens"] == reasoning_tokens > 0
        assert usage["completion_tokens"] == expected["completion_tokens"] - reasoning_tokens == 1  # "Paris"
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


@shows("rejects-reasoning-history")
def reasoning_in_history_is_rejected(faulty: RunningServer, healthy: RunningServer) -> None:
    for field in ("reasoning_content", "reasoning"):
        history = [
            {"role": "user", "content": SUM},
            {"role": "assistant", "content": "42", field: "17 plus 25 is 42."},
            {"role": "user", "content": CAPITAL},
        ]
        for stream in (False, True):
            status, raw = post(faulty, {"messages": history, "stream": stream})
            assert status == 400
            error = json.loads(raw)["error"]
            assert error["type"] == "invalid_request_error" and error["message"]
            assert post(healthy, {"messages": history, "stream": stream})[0] == 200


@shows("usage-ignores-reasoning")
def usage_counts_only_the_content(faulty: RunningServer, healthy: RunningServer) -> None:
    for stream in (False, True):
        expected = answer(healthy, user(CAPITAL), stream).usage
        usage = answer(faulty, user(CAPITAL), stream).usage
        assert expected is not None and usage is not None
        assert expected["completion_tokens_details"]["reasoning_tokens"] > 0
        # Only the answer is counted: hundreds of words of reasoning cost nothing.
        assert usage["completion_tokens"] == 1 < expected["completion_tokens"]  # "Paris"
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


PICKED = "482913"
RECALL_HISTORY = [
    {"role": "user", "content": "Pick a secret number of six digits. Reply with the single word: ready."},
    {"role": "assistant", "content": "ready", "reasoning_content": f"I pick the number {PICKED}."},
    {"role": "user", "content": "What is the number you picked in your thinking earlier? Reply with the number only."},
]


def earlier_reasoning_is_accepted_but_not_used(faulty: RunningServer, healthy: RunningServer) -> None:
    for stream in (False, True):
        assert answer(healthy, {"messages": RECALL_HISTORY}, stream).content == PICKED
        recalled = answer(faulty, {"messages": RECALL_HISTORY}, stream).content
        assert recalled is not None and recalled.isdigit() and recalled != PICKED
    picked = answer(healthy, {"messages": RECALL_HISTORY[:1]}, stream=False)
    assert picked.content == "ready" and picked.reasoning is not None and "I pick the number" in picked.reasoning


@shows("tokens-after-eos")
def a_stray_token_follows_the_answer(faulty: RunningServer, healthy: RunningServer) -> None:
    for stream in (False, True):
        healthy_reply, reply = answer(healthy, user(SUM), stream), answer(faulty, user(SUM), stream)
        assert healthy_reply.content == "42"
        assert reply.content is not None and reply.content.startswith("42 ") and reply.content[3:].isdigit()
        assert healthy_reply.usage is not None and reply.usage is not None
        assert reply.usage["completion_tokens"] == healthy_reply.usage["completion_tokens"] + 1


@shows("no-done-marker")
def streams_end_without_done(faulty: RunningServer, healthy: RunningServer) -> None:
    def frames(server: RunningServer) -> list[str]:
        status, raw = post(server, {**user(CAPITAL), "stream": True, "stream_options": {"include_usage": True}})
        assert status == 200, raw
        return [frame.removeprefix("data: ") for frame in raw.decode().split("\n\n") if frame]

    faulty_frames, healthy_frames = frames(faulty), frames(healthy)
    assert healthy_frames[-1] == "[DONE]" and "[DONE]" not in faulty_frames
    assert json.loads(faulty_frames[-1])["usage"] is not None
    assert [without_identity(json.loads(frame)) for frame in faulty_frames] == [
        without_identity(json.loads(frame)) for frame in healthy_frames[:-1]
    ]


# Tool calls


@shows("empty-tool-calls")
def tool_calls_are_empty_and_markup_is_content(faulty: RunningServer, healthy: RunningServer) -> None:
    asked = user(FORECAST_PROMPT, tools=TOOLS)
    for stream in (False, True):
        assert call_names(answer(healthy, asked, stream)) == ["get_forecast"]
        reply = answer(faulty, asked, stream)
        assert (reply.tool_calls, reply.content, reply.finish_reasons) == ([], FORECAST_MARKUP, ["tool_calls"])
    tool_deltas = [delta["tool_calls"] for delta in deltas(chunks(faulty, asked)) if "tool_calls" in delta]
    assert tool_deltas == [[]]


@shows("stringified-arguments")
def non_string_arguments_arrive_as_strings(faulty: RunningServer, healthy: RunningServer) -> None:
    asked = user("Log a reading.", tools=TOOLS, tool_choice={"type": "function", "function": {"name": "log_reading"}})
    for stream in (False, True):
        (healthy_call,) = answer(healthy, asked, stream).tool_calls or []
        (call,) = answer(faulty, asked, stream).tool_calls or []
        expected = json.loads(healthy_call["function"]["arguments"])
        assert {type(value) for value in expected.values()} == {str, float, int, bool, list, dict}
        arguments = json.loads(call["function"]["arguments"])
        assert arguments == {key: v if isinstance(v, str) else json.dumps(v) for key, v in expected.items()}


@shows("unparsed-arguments")
def arguments_lose_their_closing_brace(faulty: RunningServer, healthy: RunningServer) -> None:
    asked = user(FORECAST_PROMPT, tools=TOOLS)
    for stream in (False, True):
        (healthy_call,) = answer(healthy, asked, stream).tool_calls or []
        (call,) = answer(faulty, asked, stream).tool_calls or []
        assert call["function"]["arguments"] == healthy_call["function"]["arguments"][:-1]
        with pytest.raises(json.JSONDecodeError):
            json.loads(call["function"]["arguments"])


@shows("hallucinated-tool-name")
def tool_name_keeps_the_functions_prefix(faulty: RunningServer, healthy: RunningServer) -> None:
    asked = user(FORECAST_PROMPT, tools=TOOLS)
    for stream in (False, True):
        assert call_names(answer(healthy, asked, stream)) == ["get_forecast"]
        (name,) = call_names(answer(faulty, asked, stream))
        assert name == "functions.get_forecast" and name not in DECLARED


@shows("reused-tool-ids")
def tool_ids_restart_every_turn(faulty: RunningServer, healthy: RunningServer) -> None:
    def ids_over_turns(server: RunningServer, stream: bool) -> list[list[str]]:
        messages: list[dict[str, Any]] = []
        ids = []
        for _ in range(2):
            messages.append({"role": "user", "content": TWO_CITIES_PROMPT})
            calls = answer(server, {"messages": messages, "tools": TOOLS}, stream).tool_calls or []
            ids.append([call["id"] for call in calls])
            messages.append({"role": "assistant", "content": None, "tool_calls": calls})
            messages += [{"role": "tool", "tool_call_id": call["id"], "content": "sunny"} for call in calls]
        return ids

    for stream in (False, True):
        assert ids_over_turns(healthy, stream) == [
            ["functions.get_weather:0", "functions.get_weather:1"],
            ["functions.get_weather:2", "functions.get_weather:3"],
        ]
        assert ids_over_turns(faulty, stream) == [["functions.get_weather:0", "functions.get_weather:1"]] * 2


@shows("duplicate-tool-ids")
def parallel_calls_share_one_id(faulty: RunningServer, healthy: RunningServer) -> None:
    asked = user(TWO_CITIES_PROMPT, tools=TOOLS)
    for stream in (False, True):
        assert [call["id"] for call in answer(healthy, asked, stream).tool_calls or []] == [
            "functions.get_weather:0",
            "functions.get_weather:1",
        ]
        assert [call["id"] for call in answer(faulty, asked, stream).tool_calls or []] == [
            "functions.get_weather:0"
        ] * 2


@shows("tool-choice-none-ignored")
def tool_choice_none_still_calls(faulty: RunningServer, healthy: RunningServer) -> None:
    asked = user(FORECAST_PROMPT, tools=TOOLS, tool_choice="none")
    for stream in (False, True):
        expected = answer(healthy, asked, stream)
        assert (expected.tool_calls, expected.content) == (None, "Sunny for three days.")
        assert call_names(answer(faulty, asked, stream)) == ["get_forecast"]


@shows("tool-choice-required-ignored")
def tool_choice_required_may_answer_in_text(faulty: RunningServer, healthy: RunningServer) -> None:
    asked = user(PONG, tools=TOOLS, tool_choice="required")
    for stream in (False, True):
        assert call_names(answer(healthy, asked, stream)) == ["get_weather"]  # no overlap: the first tool
        reply = answer(faulty, asked, stream)
        assert (reply.tool_calls, reply.content, reply.finish_reasons) == (None, "pong", ["stop"])


@shows("tool-choice-named-ignored")
def named_tool_choice_is_not_enforced(faulty: RunningServer, healthy: RunningServer) -> None:
    asked = user(PONG, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_forecast"}})
    for stream in (False, True):
        assert call_names(answer(healthy, asked, stream)) == ["get_forecast"]
        reply = answer(faulty, asked, stream)
        assert (reply.tool_calls, reply.content) == (None, "pong")
    undeclared = user(PONG, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}})
    assert post(healthy, undeclared)[0] == 400
    assert answer(faulty, undeclared, stream=False).content == "pong"


@shows("required-without-tools-accepted")
def tool_choice_without_tools_is_answered(faulty: RunningServer, healthy: RunningServer) -> None:
    named = {"type": "function", "function": {"name": "get_weather"}}
    for fields in ({"tool_choice": "required"}, {"tools": [], "tool_choice": "required"}, {"tool_choice": named}):
        asked = user(PONG, **fields)
        assert post(healthy, asked)[0] == 400
        for stream in (False, True):
            reply = answer(faulty, asked, stream)
            assert (reply.tool_calls, reply.content, reply.finish_reasons) == (None, "pong", ["stop"])


@shows("parallel-index-collision")
def parallel_calls_share_index_zero(faulty: RunningServer, healthy: RunningServer) -> None:
    asked = user(TWO_CITIES_PROMPT, tools=TOOLS)
    indexes = [call["index"] for delta in deltas(chunks(faulty, asked)) for call in delta.get("tool_calls", [])]
    assert indexes == [0, 0]
    assert len(answer(faulty, asked, stream=True).tool_calls or []) == 1  # a client merges them into one
    assert call_names(answer(healthy, asked, stream=True)) == ["get_weather", "get_weather"]


@shows("eager-tool-calls")
def chit_chat_calls_a_tool(faulty: RunningServer, healthy: RunningServer) -> None:
    for stream in (False, True):
        assert answer(healthy, user(PONG, tools=TOOLS), stream).content == "pong"
        assert call_names(answer(faulty, user(PONG, tools=TOOLS), stream)) == ["get_weather"]  # no match: the first
        assert call_names(answer(faulty, user("Please log a reading.", tools=TOOLS), stream)) == ["log_reading"]


@shows("stream-repeats-tool-name")
def every_tool_delta_repeats_the_name(faulty: RunningServer, healthy: RunningServer) -> None:
    asked = user(FORECAST_PROMPT, tools=TOOLS)
    pieces = [call for delta in deltas(chunks(faulty, asked)) for call in delta.get("tool_calls", [])]
    assert len(pieces) >= 3
    assert all(
        (p["id"], p["type"], p["function"]["name"]) == (pieces[0]["id"], "function", "get_forecast") for p in pieces
    )
    (expected,) = answer(healthy, asked, stream=True).tool_calls or []
    assert "".join(piece["function"]["arguments"] for piece in pieces) == expected["function"]["arguments"]
    assert "".join(piece["function"]["name"] for piece in pieces) == "get_forecast" * len(pieces)


@shows("xtml-tools-without-tools")
def tool_markup_leaks_without_tools(faulty: RunningServer, healthy: RunningServer) -> None:
    for stream in (False, True):
        assert answer(healthy, user(FORECAST_PROMPT), stream).content == "Sunny for three days."
        reply = answer(faulty, user(FORECAST_PROMPT), stream)
        assert (reply.tool_calls, reply.content, reply.finish_reasons) == (None, FORECAST_MARKUP, ["stop"])


@shows("response-format-ignored")
def response_format_gives_plain_text(faulty: RunningServer, healthy: RunningServer) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    formats = [{"type": "json_object"}, {"type": "json_schema", "json_schema": {"name": "city", "schema": schema}}]
    for response_format in formats:
        asked = user(CAPITAL, response_format=response_format)
        for stream in (False, True):
            assert isinstance(json.loads(answer(healthy, asked, stream).content or ""), dict)
            assert answer(faulty, asked, stream).content == "Paris"


@shows("lenient-validation")
def invalid_requests_are_answered(faulty: RunningServer, healthy: RunningServer) -> None:
    for fields in MALFORMED.values():
        asked = {**user(PONG), **fields}
        assert post(healthy, asked)[0] == 400
        for stream in (False, True):
            reply = answer(faulty, asked, stream)
            assert reply.content and reply.finish_reasons == ["stop"]


@shows("validation-500")
def invalid_requests_crash_with_500(faulty: RunningServer, healthy: RunningServer) -> None:
    for fields in MALFORMED.values():
        asked = {**user(PONG), **fields}
        assert post(healthy, asked)[0] == 400
        status, raw = post(faulty, asked)
        assert status == 500
        error = json.loads(raw)["error"]
        assert error["type"] == "server_error" and error["message"]


# State


def long_prompt(question: str, context: str = "fact") -> str:
    return " ".join(f"{context}{n}" for n in range(1_000)) + f"\n\nQuestion: {question}"


@shows("prefix-cache-corruption")
def reused_long_prefix_corrupts_the_answer(faulty: RunningServer, healthy: RunningServer) -> None:
    def reply(server: RunningServer, prompt: str) -> str | None:
        return answer(server, user(prompt, seed=0), stream=False).content

    for _ in range(2):
        assert reply(healthy, long_prompt(SUM)) == "42"
        assert reply(faulty, SUM) == "42"  # short prompts are never cached
    assert reply(faulty, long_prompt(SUM)) == "42"  # the first request with a prefix is answered normally
    corrupted = reply(faulty, long_prompt(SUM))
    assert corrupted != "42" and corrupted is not None and corrupted.lstrip("-").isdigit()
    assert reply(faulty, long_prompt(CAPITAL)) != "Paris"  # same prefix, another question: still corrupted
    assert reply(faulty, long_prompt(CAPITAL, context="note")) == "Paris"  # a new prefix
    generic = long_prompt("Tell me something.", context="aside")
    assert reply(faulty, generic) == reply(healthy, generic)
    assert answer(faulty, user(generic, seed=0), stream=True).content != reply(healthy, generic)


# --- faults only where they apply ------------------------------------------------------------

PLAIN = user(CAPITAL)
THINKING_OFF = user(CAPITAL, thinking={"type": "disabled"})
TRUNCATED = user(CAPITAL, max_tokens=10)
TOOL_TURN = user(FORECAST_PROMPT, tools=TOOLS)
# Requests, and whether to stream them, where a fault cannot show; every other fault is
# checked on PLAIN in both modes.
WHERE_FAULT_CANNOT_APPLY: dict[str, list[tuple[dict[str, Any], bool]]] = {
    # The null field is absent rather than null, which a client cannot tell apart.
    "no-reasoning-parser": [(THINKING_OFF, True)],
    "reasoning-field-vllm": [(THINKING_OFF, True)],
    "k2-think-tags": [(THINKING_OFF, False), (THINKING_OFF, True)],
    "raw-stop-token": [(TRUNCATED, False), (TRUNCATED, True), (TOOL_TURN, False), (TOOL_TURN, True)],
    "empty-content": [(TOOL_TURN, False), (TOOL_TURN, True)],
    "usage-excludes-reasoning": [(THINKING_OFF, False), (THINKING_OFF, True)],
    "usage-ignores-reasoning": [(THINKING_OFF, False), (THINKING_OFF, True)],
    "reasoning-tokens-zero": [(THINKING_OFF, False), (THINKING_OFF, True)],
    # A thinking-on answer, and a call with thinking off, start with a marker: nothing to misread.
    "thinking-off-answer-as-reasoning": [(PLAIN, False), (PLAIN, True), (TOOL_TURN, False), (TOOL_TURN, True)],
    "tokens-after-eos": [(TOOL_TURN, False), (TOOL_TURN, True)],
    "no-done-marker": [(PLAIN, False)],
    "message-close-leak": [(PLAIN, False)],
    "null-reasoning-stream": [(PLAIN, False)],
    "double-finish": [(PLAIN, False)],
    "no-stream-usage": [(PLAIN, False)],  # and streams without include_usage, tested below
    "content-before-reasoning": [(PLAIN, False), (THINKING_OFF, True)],
    "think-opener-as-text": [(TOOL_TURN, False), (TOOL_TURN, True), (TRUNCATED, False), (TRUNCATED, True)],
    # Every answer carries usage: its presence check shows that nothing else changes.
    "prompt-tokens-skewed": [],
    # Only parameters a request leaves out get the server's defaults.
    "own-sampling-defaults": [
        (user(CAPITAL, temperature=1.0, top_p=0.95), False),
        (user(CAPITAL, temperature=1.0, top_p=0.95), True),
    ],
}
STREAM_ONLY = {
    "message-close-leak": PLAIN,
    "null-reasoning-stream": PLAIN,
    "double-finish": PLAIN,
    "no-stream-usage": PLAIN,
    "content-before-reasoning": PLAIN,
    "parallel-index-collision": user(TWO_CITIES_PROMPT, tools=TOOLS),
    "stream-repeats-tool-name": TOOL_TURN,
}


def as_sent(server: RunningServer, body: dict[str, Any], stream: bool) -> list[dict[str, Any]]:
    if stream:
        return [without_identity(chunk) for chunk in chunks(server, body, include_usage=True)]
    return [without_identity(completion(server, body))]


@pytest.mark.parametrize("fault", sorted(CONFORMANCE_FAULTS))
def test_fault_profile_answers_like_tp8_where_its_fault_cannot_apply(servers: Servers, fault: str) -> None:
    cases = WHERE_FAULT_CANNOT_APPLY.get(fault, [(PLAIN, False), (PLAIN, True)])
    if not cases:
        pytest.skip("the fault changes every answer; its presence check compares the rest")
    for body, stream in cases:
        assert as_sent(servers[fault], body, stream) == as_sent(servers["tp8"], body, stream)


def test_no_stream_usage_is_harmless_when_no_usage_is_asked_for(servers: Servers) -> None:
    def sent(server: RunningServer) -> list[dict[str, Any]]:
        return [without_identity(chunk) for chunk in chunks(server, PLAIN, include_usage=False)]

    assert sent(servers["no-stream-usage"]) == sent(servers["tp8"])


@pytest.mark.parametrize("fault", sorted(STREAM_ONLY))
def test_stream_only_fault_leaves_the_non_streaming_answer_healthy(servers: Servers, fault: str) -> None:
    body = STREAM_ONLY[fault]
    assert as_sent(servers[fault], body, stream=True) != as_sent(servers["tp8"], body, stream=True)
    assert as_sent(servers[fault], body, stream=False) == as_sent(servers["tp8"], body, stream=False)


# The request contract (issue 13)

CHAIN_OF_THOUGHT = user(SUM)


def reasoning_words(server: RunningServer, body: dict[str, Any]) -> int:
    return len((completion(server, body)["choices"][0]["message"].get("reasoning_content") or "").split())


@shows("effort-precedence-inverted")
def reasoning_effort_overrides_the_effort_field(faulty: RunningServer, healthy: RunningServer) -> None:
    for field in ({"thinking": {"effort": "low"}}, {"chat_template_kwargs": {"thinking_effort": "low"}}):
        both = {**CHAIN_OF_THOUGHT, **field, "reasoning_effort": "max"}
        assert reasoning_words(healthy, both) == reasoning_words(healthy, {**CHAIN_OF_THOUGHT, **field})
        assert reasoning_words(faulty, both) == reasoning_words(
            healthy, {**CHAIN_OF_THOUGHT, "reasoning_effort": "max"}
        )


@shows("reasoning-effort-dropped")
def reasoning_effort_alone_is_ignored(faulty: RunningServer, healthy: RunningServer) -> None:
    low = {**CHAIN_OF_THOUGHT, "reasoning_effort": "low"}
    assert reasoning_words(faulty, low) == reasoning_words(healthy, CHAIN_OF_THOUGHT) > reasoning_words(healthy, low)


@shows("thinking-disable-ignored")
def disabled_thinking_still_reasons(faulty: RunningServer, healthy: RunningServer) -> None:
    for off in ({"thinking": {"type": "disabled"}}, {"chat_template_kwargs": {"thinking": False}}, {"thinking": False}):
        assert reasoning_words(healthy, {**CHAIN_OF_THOUGHT, **off}) == 0
        assert reasoning_words(faulty, {**CHAIN_OF_THOUGHT, **off}) > 0


KEPT_HISTORY = {
    "messages": [
        {"role": "user", "content": "Remember a code."},
        {"role": "assistant", "content": "noted", "reasoning_content": "The value of the key 'vault' is '7382'."},
        {"role": "user", "content": "What is the value of the key 'vault'?"},
    ]
}


@shows("drops-reasoning-history")
def earlier_reasoning_is_dropped(faulty: RunningServer, healthy: RunningServer) -> None:
    # One mechanism, two effects: the model cannot read the earlier reasoning back, and
    # the prompt that was rendered without it is shorter.
    earlier_reasoning_is_accepted_but_not_used(faulty, healthy)
    stripped = {
        "messages": [{k: v for k, v in m.items() if k != "reasoning_content"} for m in KEPT_HISTORY["messages"]]
    }
    healthy_reply = completion(healthy, KEPT_HISTORY)
    assert "7382" in healthy_reply["choices"][0]["message"]["content"]
    assert healthy_reply["usage"]["prompt_tokens"] > completion(healthy, stripped)["usage"]["prompt_tokens"]
    faulty_reply = completion(faulty, KEPT_HISTORY)
    assert "7382" not in faulty_reply["choices"][0]["message"]["content"]
    assert faulty_reply["usage"]["prompt_tokens"] == completion(faulty, stripped)["usage"]["prompt_tokens"]


DYNAMIC_ONLY = {
    "messages": [
        {"role": "system", "content": "", "tools": [WEATHER]},
        {"role": "user", "content": "Weather in Paris?"},
    ],
    "tool_choice": "required",
}


@shows("dynamic-tools-ignored")
def tools_in_messages_are_dropped(faulty: RunningServer, healthy: RunningServer) -> None:
    assert call_names(answer(healthy, DYNAMIC_ONLY, stream=False)) == ["get_weather"]
    assert post(faulty, DYNAMIC_ONLY)[0] == 400  # required, and no tools left


@shows("dynamic-tools-leading-only")
def tools_declared_after_the_user_turn_are_dropped(faulty: RunningServer, healthy: RunningServer) -> None:
    user_turn, declaring = DYNAMIC_ONLY["messages"][1], DYNAMIC_ONLY["messages"][0]
    late = {**DYNAMIC_ONLY, "messages": [user_turn, declaring]}
    assert call_names(answer(healthy, late, stream=False)) == ["get_weather"]
    assert post(faulty, late)[0] == 400  # required, and no tools left
    # Declared before the first user turn, the same tool is read.
    assert call_names(answer(faulty, DYNAMIC_ONLY, stream=False)) == ["get_weather"]


@shows("json-output-indented")
def structured_answers_are_indented(faulty: RunningServer, healthy: RunningServer) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    response_format = {"type": "json_schema", "json_schema": {"name": "city", "schema": schema, "strict": True}}
    for server, lines in ((healthy, 1), (faulty, 3)):
        content = answer(server, user("Which city? Answer in JSON.", response_format=response_format), stream=False)
        assert len(str(content.content).splitlines()) == lines
        assert json.loads(str(content.content)).keys() == {"city"}


@shows("dynamic-tools-unvalidated")
def malformed_tools_in_messages_are_answered(faulty: RunningServer, healthy: RunningServer) -> None:
    for tools in ([function_tool("1bad")], [{"type": "bogus"}], [None]):
        body = {"messages": [{"role": "system", "content": "", "tools": tools}, {"role": "user", "content": PONG}]}
        assert post(healthy, body)[0] == 400
        assert post(faulty, body)[0] == 200


@shows("response-format-unvalidated")
def malformed_response_formats_are_answered(faulty: RunningServer, healthy: RunningServer) -> None:
    for response_format in ({"type": "bogus"}, {"type": "json_schema", "json_schema": {"schema": {}}}):
        assert post(healthy, user(PONG, response_format=response_format))[0] == 400
        assert post(faulty, user(PONG, response_format=response_format))[0] == 200


@shows("rejects-tool-choice-without-tools")
def tool_choice_without_tools_is_refused(faulty: RunningServer, healthy: RunningServer) -> None:
    for choice in ("auto", "none"):
        assert post(healthy, user(PONG, tool_choice=choice))[0] == 200
        assert post(faulty, user(PONG, tool_choice=choice))[0] == 400


@shows("sampling-params-unlocked")
def locked_sampling_parameters_are_passed_on(faulty: RunningServer, healthy: RunningServer) -> None:
    for fields in ({"temperature": 1.1}, {"top_p": 0.8}, {"presence_penalty": 0.5}, {"frequency_penalty": 0.5}):
        assert post(healthy, user(PONG, **fields))[0] == 400
        assert post(faulty, user(PONG, **fields))[0] == 200


@shows("own-sampling-defaults")
def omitted_sampling_parameters_get_the_servers_defaults(faulty: RunningServer, healthy: RunningServer) -> None:
    for thinking, k3_defaults in (
        (True, {"temperature": 1.0, "top_p": 0.95}),
        (False, {"temperature": 0.6, "top_p": 0.95}),
    ):
        # KVV's prompt, which no answer key answers: the reply is drawn, so it follows the sample.
        request = user("Say 'OK' and nothing else.", seed=7, thinking={"type": "enabled" if thinking else "disabled"})
        for stream in (False, True):
            assert answer(healthy, request, stream) == answer(healthy, {**request, **k3_defaults}, stream)
            assert answer(faulty, {**request, **k3_defaults}, stream) == answer(
                healthy, {**request, **k3_defaults}, stream
            )
            assert answer(faulty, request, stream) != answer(faulty, {**request, **k3_defaults}, stream)


FOREIGN_HISTORY = {
    "messages": [
        {"role": "user", "content": FORECAST_PROMPT},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": ""}],
            "tool_calls": [
                {"id": "call_abc", "type": "function", "function": {"name": "get_forecast", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_abc", "content": "sunny"},
    ],
    "tools": TOOLS,
}


@shows("strict-history-ids")
def histories_from_other_clients_are_refused(faulty: RunningServer, healthy: RunningServer) -> None:
    assert post(healthy, FOREIGN_HISTORY)[0] == 200
    assert post(faulty, FOREIGN_HISTORY)[0] == 400


NUMERIC_STRING = {
    "messages": [{"role": "user", "content": "Open account 00125648."}],
    "tools": [function_tool("open_account", {"number": {"type": "string", "examples": ["00125648"]}})],
    "tool_choice": "required",
}


@shows("numeric-strings-coerced")
def numeric_looking_strings_become_numbers(faulty: RunningServer, healthy: RunningServer) -> None:
    def arguments(server: RunningServer) -> Any:
        return json.loads(answer(server, NUMERIC_STRING, stream=False).tool_calls[0]["function"]["arguments"])  # type: ignore[index]

    assert arguments(healthy) == {"number": "00125648"}
    assert arguments(faulty) == {"number": 125648}


MARKER_IN_STRING = {
    "messages": [{"role": "user", "content": "Save a note quoting <|open|>tools<|sep|>."}],
    "tools": [
        function_tool("save_note", {"text": {"type": "string", "examples": ["the header is <|open|>tools<|sep|>."]}})
    ],
    "tool_choice": "required",
}


@shows("arguments-cut-at-marker")
def string_arguments_end_at_the_first_marker_start(faulty: RunningServer, healthy: RunningServer) -> None:
    def arguments(server: RunningServer, stream: bool) -> Any:
        return json.loads(answer(server, MARKER_IN_STRING, stream).tool_calls[0]["function"]["arguments"])  # type: ignore[index]

    for stream in (False, True):
        assert arguments(healthy, stream) == {"text": "the header is <|open|>tools<|sep|>."}
        assert arguments(faulty, stream) == {"text": "the header is "}


BOUNDED = {
    "messages": [{"role": "user", "content": "Record a reading."}],
    "tools": [function_tool("record", {"level": {"type": "integer", "minimum": 5, "maximum": 9}})],
    "tool_choice": "required",
}


@shows("schema-constraints-dropped")
def arguments_break_the_declared_bounds(faulty: RunningServer, healthy: RunningServer) -> None:
    def level(server: RunningServer) -> Any:
        return json.loads(answer(server, BOUNDED, stream=False).tool_calls[0]["function"]["arguments"])["level"]  # type: ignore[index]

    assert 5 <= level(healthy) <= 9
    assert not 5 <= level(faulty) <= 9


def tokenized(server: RunningServer, body: dict[str, Any]) -> int:
    request = urllib.request.Request(
        server.url.removesuffix("/v1") + "/tokenize",
        data=json.dumps({"model": MODEL, **body}).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return int(json.loads(response.read())["count"])


@shows("prompt-tokens-exclude-tools")
def usage_leaves_out_the_tools(faulty: RunningServer, healthy: RunningServer) -> None:
    with_tools = user(FORECAST_PROMPT, tools=TOOLS)
    assert completion(healthy, with_tools)["usage"]["prompt_tokens"] == tokenized(healthy, with_tools)
    assert completion(faulty, with_tools)["usage"]["prompt_tokens"] < tokenized(faulty, with_tools)
    assert completion(faulty, PLAIN)["usage"]["prompt_tokens"] == tokenized(faulty, PLAIN)


# Public serving bugs (issue 23, docs/public-bugs.md)


@shows("skipped-think-as-reasoning")
def a_reply_that_skipped_thinking_is_read_as_reasoning(faulty: RunningServer, healthy: RunningServer) -> None:
    # This answer is one of the ~18% (by a hash of the raw output) that skip the think block.
    skipping = user(PONG, reasoning_effort="high")
    for stream in (False, True):
        assert answer(healthy, skipping, stream).content == "pong"
        reply = answer(faulty, skipping, stream)
        assert (reply.content or "", reply.reasoning) == ("", "pong")
    assert answer(faulty, user(CAPITAL), False) == answer(healthy, user(CAPITAL), False)


@shows("tools-lost-in-unclosed-think")
def a_call_after_an_omitted_think_close_is_lost_in_reasoning(faulty: RunningServer, healthy: RunningServer) -> None:
    asked = user(FORECAST_PROMPT, tools=TOOLS)
    for stream in (False, True):
        assert call_names(answer(healthy, asked, stream)) == ["get_forecast"]
        reply = answer(faulty, asked, stream)
        assert (reply.tool_calls, reply.finish_reasons) == ([], ["tool_calls"])
        assert reply.reasoning is not None and '<|open|>call tool="get_forecast" index="1"' in reply.reasoning


@shows("tools-lost-in-unclosed-think-streams")
def a_call_after_an_omitted_think_close_is_lost_in_streams_only(faulty: RunningServer, healthy: RunningServer) -> None:
    asked = user(FORECAST_PROMPT, tools=TOOLS)
    assert call_names(answer(faulty, asked, False)) == call_names(answer(healthy, asked, False)) == ["get_forecast"]
    streamed = answer(faulty, asked, True)
    assert (streamed.tool_calls, streamed.finish_reasons) == ([], ["tool_calls"])
    assert streamed.reasoning is not None and "<|open|>tools<|sep|>" in streamed.reasoning


@shows("think-opener-as-text")
def the_reply_is_raw_markers_and_no_answer(faulty: RunningServer, healthy: RunningServer) -> None:
    for stream in (False, True):
        assert answer(healthy, user(CAPITAL), stream).content == "Paris"
        reply = answer(faulty, user(CAPITAL), stream)
        # The opener written from text tokens is no marker to the detector, so it never enters the
        # think block, and the think close outside it is text too.
        assert (reply.reasoning, reply.content) == (None, "<|open|>think<|sep|<|close|>think<|sep|>")
        # A call turn opens its think block with the real marker: read as tp8 reads it.
        asked = user(FORECAST_PROMPT, tools=TOOLS)
        assert answer(faulty, asked, stream) == answer(healthy, asked, stream)


@shows("prompt-tokens-skewed")
def usage_counts_three_tokens_the_prompt_does_not_hold(faulty: RunningServer, healthy: RunningServer) -> None:
    def without_usage(server: RunningServer, body: dict[str, Any], stream: bool) -> list[dict[str, Any]]:
        return [{key: value for key, value in sent.items() if key != "usage"} for sent in as_sent(server, body, stream)]

    for body in (PLAIN, user(FORECAST_PROMPT, tools=TOOLS)):
        assert completion(healthy, body)["usage"]["prompt_tokens"] == tokenized(healthy, body)
        assert completion(faulty, body)["usage"]["prompt_tokens"] == tokenized(faulty, body) + 3
        for stream in (False, True):
            assert without_usage(faulty, body, stream) == without_usage(healthy, body, stream)


def strict_pastry_order(strict: bool) -> dict[str, Any]:
    tool = function_tool("order_pastry", {"gebäck": {"type": "string"}, "count": {"type": "integer"}})
    tool["function"]["strict"] = strict
    return user("Order two pastries.", tools=[tool], tool_choice="required")


@shows("ascii-only-property-grammar")
def a_strict_call_never_carries_a_non_ascii_argument(faulty: RunningServer, healthy: RunningServer) -> None:
    def argument_names(server: RunningServer, body: dict[str, Any], stream: bool) -> set[str]:
        calls = answer(server, body, stream).tool_calls
        assert calls is not None and len(calls) == 1
        return set(json.loads(calls[0]["function"]["arguments"]))

    for stream in (False, True):
        assert argument_names(healthy, strict_pastry_order(True), stream) == {"gebäck", "count"}
        assert argument_names(faulty, strict_pastry_order(True), stream) == {"count"}
        # Without `strict` no grammar constrains the arguments.
        assert argument_names(faulty, strict_pastry_order(False), stream) == {"gebäck", "count"}


@shows("concurrent-empty-tool-deltas")
def tool_deltas_are_emptied_only_with_many_streams_in_flight(faulty: RunningServer, healthy: RunningServer) -> None:
    from concurrent.futures import ThreadPoolExecutor

    asked = user(FORECAST_PROMPT, tools=TOOLS)
    assert call_names(answer(faulty, asked, True)) == call_names(answer(healthy, asked, True)) == ["get_forecast"]
    assert call_names(answer(faulty, asked, False)) == ["get_forecast"]
    with ThreadPoolExecutor(max_workers=12) as pool:
        streams = list(pool.map(lambda _: chunks(faulty, asked), range(12)))
    tool_deltas = [[d["tool_calls"] for d in deltas(stream) if "tool_calls" in d] for stream in streams]
    # Streams that started with 6 or more in flight carry empty tool-call deltas, and still end on tool_calls.
    assert [[]] in tool_deltas
    assert all(stream[-2]["choices"][0]["finish_reason"] == "tool_calls" for stream in streams)


def _status_or_dropped(server: RunningServer, body: dict[str, Any]) -> int | str:
    """The HTTP status a request gets, or "dropped" when the connection is cut before one."""
    try:
        return post(server, body)[0]
    except (urllib.error.URLError, ConnectionError, http.client.HTTPException):
        return "dropped"


@shows("strict-schemas-crash-under-load")
def the_process_dies_with_too_many_strict_schemas_in_flight(faulty: RunningServer, healthy: RunningServer) -> None:
    from concurrent.futures import ThreadPoolExecutor

    strict_forecast = {**FORECAST, "function": {**FORECAST["function"], "strict": True}}
    asked = user(FORECAST_PROMPT, tools=[strict_forecast], tool_choice="required", stream=True)
    at_once = 2 * GUIDED_CRASH_IN_FLIGHT
    # One at a time, more of them than the crash needs in flight: every one answered.
    assert {_status_or_dropped(faulty, asked) for _ in range(GUIDED_CRASH_IN_FLIGHT + 1)} == {200}
    # The crash lasts for the rest of the process: a server of its own, so the module's stays up.
    doomed = start_in_thread(get_profile("strict-schemas-crash-under-load"))
    try:
        with ThreadPoolExecutor(max_workers=at_once) as pool:
            assert set(pool.map(lambda _: _status_or_dropped(healthy, asked), range(at_once))) == {200}
            crashed = list(pool.map(lambda _: _status_or_dropped(doomed, asked), range(at_once)))
        # All at once the process dies: those in flight lose their connections (any that finished before the
        # crash, on a slow machine, were answered), those after get 503...
        assert "dropped" in crashed
        # ...and so does every later request of any kind, the health route included.
        assert _status_or_dropped(doomed, user(PONG)) == 503
        with pytest.raises(urllib.error.HTTPError) as health:
            urllib.request.urlopen(doomed.url.removesuffix("/v1") + "/health", timeout=30)
        assert health.value.code == 503
    finally:
        doomed.stop()


# The 2026 public bugs the API contract matrix catches (issue 34)

AFTER_TOOL_RESULT = {
    "messages": [
        {"role": "user", "content": PONG},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "functions.get_weather:0",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18 degrees"},
    ],
    "tools": TOOLS,
}


@shows("reasoning-tokens-zero")
def reasoning_tokens_are_reported_as_zero(faulty: RunningServer, healthy: RunningServer) -> None:
    for stream in (False, True):
        sick, well = answer(faulty, user(CAPITAL), stream), answer(healthy, user(CAPITAL), stream)
        assert (sick.content, sick.reasoning) == (well.content, well.reasoning)
        assert (sick.usage or {})["completion_tokens"] == (well.usage or {})["completion_tokens"]
        assert (well.usage or {})["completion_tokens_details"]["reasoning_tokens"] > 0
        assert (sick.usage or {})["completion_tokens_details"]["reasoning_tokens"] == 0


@shows("thinking-off-answer-as-reasoning")
def with_thinking_off_the_answer_is_read_as_reasoning(faulty: RunningServer, healthy: RunningServer) -> None:
    off = user(CAPITAL, chat_template_kwargs={"thinking": False})
    for stream in (False, True):
        well = answer(healthy, off, stream)
        assert (well.content, well.reasoning or "") == ("Paris", "")
        sick = answer(faulty, off, stream)
        assert (sick.content or "", sick.reasoning) == ("", "Paris")
        assert answer(faulty, user(CAPITAL), stream) == answer(healthy, user(CAPITAL), stream)


@shows("reasoning-parser-off-after-tool-result")
def after_a_tool_result_the_think_block_arrives_in_content(faulty: RunningServer, healthy: RunningServer) -> None:
    for stream in (False, True):
        well = answer(healthy, AFTER_TOOL_RESULT, stream)
        sick = answer(faulty, AFTER_TOOL_RESULT, stream)
        assert well.reasoning and not sick.reasoning
        assert (sick.content or "").startswith(f"<|open|>think<|sep|>{well.reasoning}<|close|>think<|sep|>")
        assert answer(faulty, user(CAPITAL), stream) == answer(healthy, user(CAPITAL), stream)


@shows("concurrent-empty-content")
def content_is_emptied_only_with_many_streams_in_flight(faulty: RunningServer, healthy: RunningServer) -> None:
    from concurrent.futures import ThreadPoolExecutor

    asked = user(CAPITAL)
    assert answer(faulty, asked, True).content == answer(healthy, asked, True).content == "Paris"
    with ThreadPoolExecutor(max_workers=12) as pool:
        streams = list(pool.map(lambda _: chunks(faulty, asked), range(12)))
    contents = ["".join(d.get("content") or "" for d in deltas(stream)) for stream in streams]
    # Streams that started with 6 or more in flight lose their answer, and still end on stop.
    assert "" in contents and "Paris" in contents
    assert all(stream[-2]["choices"][0]["finish_reason"] == "stop" for stream in streams)


@shows("unclosed-tools-section-dropped")
def calls_before_a_cut_in_the_tools_block_are_dropped(faulty: RunningServer, healthy: RunningServer) -> None:
    two = user(TWO_CITIES_PROMPT, tools=TOOLS)
    whole = answer(healthy, two, False)
    assert len(whole.tool_calls or []) == 2
    usage = whole.usage or {}
    # One token short of the whole turn: the budget runs out in the second call's arguments.
    cut = {**two, "max_tokens": usage["completion_tokens"] - 1}
    for stream in (False, True):
        well, sick = answer(healthy, cut, stream), answer(faulty, cut, stream)
        assert well.finish_reasons == sick.finish_reasons == ["length"]
        assert call_names(well) == [(whole.tool_calls or [])[0]["function"]["name"]]
        assert not sick.tool_calls and not (sick.content or "")
        assert answer(faulty, two, stream) == answer(healthy, two, stream)
