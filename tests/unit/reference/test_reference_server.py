"""The embedded reference deployment, exercised over real HTTP with the openai SDK."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from jsonschema import Draft202012Validator

from k3conformance.reference import AnswerKey, RunningServer, Simulator, default_fixtures_dir, get_profile
from k3conformance.reference.server import start_in_thread

MODEL = "kimi-k3-simulator"
REPO_ROOT = Path(__file__).resolve().parents[3]
CAPITAL_PROMPT = "What is the capital of France? Reply with the city name only."
WEATHER_PROMPT = "What is the weather in Paris right now?"
SUITE = {
    "suite": "reference-test",
    "items": [
        {
            "id": "capital",
            "prompt": CAPITAL_PROMPT,
            "answer": "Paris",
            "simulator": {"reply": "Paris", "graded": False},
        },
        {
            "id": "color",
            "prompt": "Name a primary color.",
            "answer": "red",
            "simulator": {"reply": "red", "graded": False},
        },
        {
            "id": "two-colors",
            "prompt": "Name a primary color. Then name a secondary one.",
            "answer": "red, green",
            "simulator": {"reply": "red, green", "graded": False},
        },
        {
            "id": "weather",
            "prompt": WEATHER_PROMPT,
            "answer": "sunny",
            "simulator": {
                "reply": "It is sunny in Paris.",
                "graded": False,
                "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}],
            },
        },
        {
            "id": "ada",
            "prompt": "Describe Ada Lovelace as JSON.",
            "answer": {"name": "Ada Lovelace", "born": 1815},
            "simulator": {"reply": "Ada Lovelace, born 1815", "graded": False},
        },
    ]
    + [{"id": f"sum-{n}", "prompt": f"Compute {n} plus {n} exactly.", "answer": str(2 * n)} for n in range(200)],
}
POINT = {
    "type": "object",
    "properties": {"lat": {"type": "number", "minimum": -90, "maximum": 90}, "lon": {"type": "number"}},
    "required": ["lat", "lon"],
    "additionalProperties": False,
}
ROUTE_PARAMETERS = {
    "type": "object",
    "$defs": {"unit": {"type": "string", "enum": ["km", "mi"]}, "point": POINT},
    "properties": {
        "unit": {"$ref": "#/$defs/unit"},
        "start": {"anyOf": [{"$ref": "#/$defs/point"}, {"type": "string"}]},
        "legs": {"type": "array", "items": {"type": "array", "items": {"$ref": "#/$defs/point"}, "minItems": 2}},
        "days": {"type": "integer", "minimum": 3, "maximum": 14},
        "note": {"type": ["string", "null"], "minLength": 12},
        "mode": {"oneOf": [{"const": "drive"}, {"const": "walk"}]},
    },
    "required": ["unit", "start", "legs", "days", "mode"],
    "additionalProperties": False,
}


def function_tool(name: str, parameters: dict[str, Any] | None = None) -> dict[str, Any]:
    schema = parameters or {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    return {"type": "function", "function": {"name": name, "parameters": schema}}


TOOLS = [function_tool("get_weather"), function_tool("plan_route", ROUTE_PARAMETERS), function_tool("search-web")]


@pytest.fixture(scope="module")
def fixtures_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("fixtures")
    (directory / "reference-test.json").write_text(json.dumps(SUITE))
    return directory


@pytest.fixture(scope="module")
def server(fixtures_dir: Path) -> Iterator[RunningServer]:
    with start_in_thread(get_profile("tp8"), fixtures_dir=fixtures_dir) as running:
        yield running


@pytest.fixture(scope="module")
def keyed_server(fixtures_dir: Path) -> Iterator[RunningServer]:
    with start_in_thread(get_profile("tp8"), fixtures_dir=fixtures_dir, api_key="sk-test-secret") as running:
        yield running


@pytest.fixture(scope="module")
def client(server: RunningServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0)


def http(method: str, url: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    data = body if isinstance(body, bytes) else None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def root(server: RunningServer) -> str:
    return server.url.removesuffix("/v1")


def chat(server: RunningServer, content: str = "hello", **fields: Any) -> tuple[int, dict[str, Any]]:
    body = {"model": MODEL, "messages": [{"role": "user", "content": content}], **fields}
    status, raw = http("POST", server.url + "/chat/completions", body)
    return status, json.loads(raw)


def sse_frames(server: RunningServer, body: dict[str, Any]) -> list[str]:
    status, raw = http("POST", server.url + "/chat/completions", {"model": MODEL, **body, "stream": True})
    assert status == 200
    frames = [frame for frame in raw.decode().split("\n\n") if frame]
    assert all(frame.startswith("data: ") for frame in frames)
    return [frame.removeprefix("data: ") for frame in frames]


def test_models_listing_identifies_a_simulator(client: openai.OpenAI) -> None:
    (model,) = client.models.list().data
    assert model.id == MODEL
    assert "simulator" in model.owned_by
    assert (model.model_extra or {})["k3conformance_simulator"]["profile"] == "tp8"


def test_non_stream_completion_has_reasoning_content_and_consistent_usage(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": CAPITAL_PROMPT}])
    message = response.choices[0].message
    reasoning = (message.model_extra or {})["reasoning_content"]
    assert "capital of France" in reasoning
    assert message.content == "Paris"
    assert response.choices[0].finish_reason == "stop"
    usage = response.usage
    assert usage is not None and usage.completion_tokens_details is not None
    assert usage.completion_tokens_details.reasoning_tokens == len(reasoning.split())
    assert usage.completion_tokens == len(reasoning.split()) + 1
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    assert usage.prompt_tokens == len(CAPITAL_PROMPT.split()) + 4


@pytest.mark.parametrize("tools", [None, TOOLS])
def test_stream_reassembles_to_the_non_stream_response(client: openai.OpenAI, tools: Any) -> None:
    request: dict[str, Any] = {"model": MODEL, "messages": [{"role": "user", "content": WEATHER_PROMPT}], "seed": 3}
    if tools:
        request["tools"] = tools
    whole = client.chat.completions.create(**request)
    reasoning, content, calls, finishes, usage = "", "", [], [], None
    for chunk in client.chat.completions.create(**request, stream=True, stream_options={"include_usage": True}):
        usage = chunk.usage or usage
        for choice in chunk.choices:
            reasoning += (choice.delta.model_extra or {}).get("reasoning_content") or ""
            content += choice.delta.content or ""
            calls += [(call.id, call.function.name, call.function.arguments) for call in choice.delta.tool_calls or []]
            finishes += [choice.finish_reason] if choice.finish_reason else []
    message = whole.choices[0].message
    assert reasoning == (message.model_extra or {})["reasoning_content"]
    assert content == (message.content or "")
    assert calls == [(c.id, c.function.name, c.function.arguments) for c in message.tool_calls or []]
    assert finishes == [whole.choices[0].finish_reason]
    assert usage == whole.usage


@pytest.mark.parametrize("include_usage", [True, False])
def test_stream_frame_order(server: RunningServer, include_usage: bool) -> None:
    body: dict[str, Any] = {"messages": [{"role": "user", "content": CAPITAL_PROMPT}]}
    if include_usage:
        body["stream_options"] = {"include_usage": True}
    frames = sse_frames(server, body)
    assert frames[-1] == "[DONE]"
    chunks = [json.loads(frame) for frame in frames[:-1]]
    assert len({(chunk["id"], chunk["created"], chunk["model"]) for chunk in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant"}
    kinds = []
    for chunk in chunks[1:]:
        if not chunk["choices"]:
            kinds.append("usage")
            continue
        choice = chunk["choices"][0]
        kinds.append("finish" if choice["finish_reason"] else next(iter(choice["delta"])))
    expected_tail = ["finish", "usage"] if include_usage else ["finish"]
    assert kinds[-len(expected_tail) :] == expected_tail
    body_kinds = kinds[: -len(expected_tail)]
    assert body_kinds == sorted(body_kinds, key=["reasoning_content", "content"].index)
    assert body_kinds.count("content") >= 1 and body_kinds.count("reasoning_content") > 1


def test_reasoning_grows_with_effort(server: RunningServer) -> None:
    for seed in range(5):
        lengths = []
        for effort in ("low", "high", "max"):
            status, body = chat(server, CAPITAL_PROMPT, seed=seed, reasoning_effort=effort)
            assert status == 200
            lengths.append(body["usage"]["completion_tokens_details"]["reasoning_tokens"])
        assert lengths == sorted(lengths) and lengths[0] < lengths[2]


@pytest.mark.parametrize(
    "fields",
    [
        {"chat_template_kwargs": {"thinking_effort": "low"}},
        {"thinking": {"type": "enabled", "keep": "all", "effort": "low"}},
    ],
)
def test_effort_can_come_from_template_kwargs_or_kimi_thinking(server: RunningServer, fields: dict[str, Any]) -> None:
    _, default = chat(server, CAPITAL_PROMPT, seed=1)
    _, low = chat(server, CAPITAL_PROMPT, seed=1, **fields)
    _, explicit = chat(server, CAPITAL_PROMPT, seed=1, reasoning_effort="low")
    assert low["choices"][0]["message"] == explicit["choices"][0]["message"] != default["choices"][0]["message"]


@pytest.mark.parametrize("fields", [{"chat_template_kwargs": {"thinking": False}}, {"thinking": {"type": "disabled"}}])
def test_disabled_thinking_has_no_reasoning(server: RunningServer, fields: dict[str, Any]) -> None:
    status, body = chat(server, CAPITAL_PROMPT, **fields)
    assert status == 200
    assert body["choices"][0]["message"]["reasoning_content"] is None
    assert body["choices"][0]["message"]["content"] == "Paris"
    assert body["usage"]["completion_tokens_details"]["reasoning_tokens"] == 0


def test_same_seed_same_output_and_seeds_can_differ(server: RunningServer) -> None:
    outputs = [chat(server, "Tell me something.", seed=seed)[1]["choices"][0]["message"] for seed in (7, 7, 8, 9)]
    assert outputs[0] == outputs[1]
    assert outputs[0] != outputs[2] or outputs[0] != outputs[3]
    assert "k3conformance reference simulator" in outputs[0]["content"]


def test_fixture_prompt_wrapped_in_a_template_gets_the_fixture_reply(server: RunningServer) -> None:
    _, body = chat(server, f"Answer carefully.\n\nQuestion: {CAPITAL_PROMPT}\nAnswer:")
    assert body["choices"][0]["message"]["content"] == "Paris"
    _, body = chat(server, "<q>Name a primary color. Then name a secondary one.</q>")
    assert body["choices"][0]["message"]["content"] == "red, green"  # the longest matching prompt wins


def test_max_tokens_exhausted_in_reasoning_gives_empty_content(server: RunningServer) -> None:
    status, body = chat(server, CAPITAL_PROMPT, max_tokens=10)
    assert status == 200
    choice = body["choices"][0]
    assert choice["finish_reason"] == "length"
    assert choice["message"]["content"] == ""
    assert len(choice["message"]["reasoning_content"].split()) == 10
    assert body["usage"]["completion_tokens"] == 10


def test_max_completion_tokens_exhausted_in_content_truncates_it(server: RunningServer) -> None:
    _, full = chat(server, "Tell me something.", seed=4, reasoning_effort="low")
    reasoning_tokens = full["usage"]["completion_tokens_details"]["reasoning_tokens"]
    _, cut = chat(
        server, "Tell me something.", seed=4, reasoning_effort="low", max_completion_tokens=reasoning_tokens + 3
    )
    assert cut["choices"][0]["finish_reason"] == "length"
    assert cut["choices"][0]["message"]["content"].split() == full["choices"][0]["message"]["content"].split()[:3]


def first_call(body: dict[str, Any]) -> dict[str, Any]:
    assert body["choices"][0]["finish_reason"] == "tool_calls"
    assert body["choices"][0]["message"]["content"] is None
    return body["choices"][0]["message"]["tool_calls"][0]  # type: ignore[no-any-return]


def called_tool(server: RunningServer, prompt: str, **fields: Any) -> str:
    return str(first_call(chat(server, prompt, **fields)[1])["function"]["name"])


def test_tool_choice_none_never_calls(server: RunningServer) -> None:
    _, body = chat(server, WEATHER_PROMPT, tools=TOOLS, tool_choice="none")
    assert body["choices"][0]["message"]["tool_calls"] is None
    assert body["choices"][0]["message"]["content"] == "It is sunny in Paris."


def test_tool_choice_auto_uses_fixture_calls_then_name_words_then_nothing(server: RunningServer) -> None:
    call = first_call(chat(server, WEATHER_PROMPT, tools=TOOLS)[1])
    assert call["function"] == {"name": "get_weather", "arguments": json.dumps({"city": "Paris"})}
    assert called_tool(server, "Please search the web for cats.", tools=TOOLS) == "search-web"
    _, body = chat(server, "Hello there.", tools=TOOLS, tool_choice="auto")
    assert body["choices"][0]["message"]["tool_calls"] is None and body["choices"][0]["finish_reason"] == "stop"


def test_tool_choice_required_picks_the_best_overlapping_tool(server: RunningServer) -> None:
    assert called_tool(server, "Help me with my route.", tools=TOOLS, tool_choice="required") == "plan_route"
    assert called_tool(server, "Hello.", tools=TOOLS, tool_choice="required") == "get_weather"  # no overlap: first


def test_named_tool_choice_calls_exactly_that_tool(server: RunningServer) -> None:
    named = {"type": "function", "function": {"name": "search-web"}}
    _, body = chat(server, WEATHER_PROMPT, tools=TOOLS, tool_choice=named)
    (call,) = body["choices"][0]["message"]["tool_calls"]
    assert call["function"]["name"] == "search-web" and call["id"] == "functions.search-web:0"


def test_synthesized_arguments_validate_against_the_tool_schema(server: RunningServer) -> None:
    loose = function_tool(
        "tag_item", {"type": "object", "properties": {"tag": {"type": "string"}, "n": {"type": "integer"}}}
    )
    for tool in (function_tool("plan_route", ROUTE_PARAMETERS), loose):
        name = tool["function"]["name"]
        choice = {"type": "function", "function": {"name": name}}
        arguments = json.loads(
            first_call(chat(server, "Go.", tools=[tool], tool_choice=choice)[1])["function"]["arguments"]
        )
        schema = tool["function"]["parameters"]
        Draft202012Validator.check_schema(schema)
        assert list(Draft202012Validator(schema).iter_errors(arguments)) == []
        assert set(arguments) == set(schema.get("required", schema["properties"]))


def test_tool_ids_stay_unique_across_turns_and_tool_results_are_used(server: RunningServer) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": WEATHER_PROMPT}]
    seen_ids = []
    for _ in range(3):
        _, body = chat(server, messages=messages, tools=TOOLS, tool_choice="required")
        message = body["choices"][0]["message"]
        seen_ids += [call["id"] for call in message["tool_calls"]]
        messages.append({"role": "assistant", "content": None, "tool_calls": message["tool_calls"]})
        messages.append({"role": "tool", "tool_call_id": seen_ids[-1], "content": "18 degrees and sunny"})
    assert seen_ids == ["functions.get_weather:0", "functions.get_weather:1", "functions.get_weather:2"]
    _, body = chat(server, messages=messages, tools=TOOLS)
    final = body["choices"][0]
    assert final["finish_reason"] == "stop" and final["message"]["tool_calls"] is None
    assert '"18 degrees and sunny"' in final["message"]["content"] and "get_weather" in final["message"]["content"]


def test_json_schema_response_format_validates(server: RunningServer) -> None:
    person = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "born": {"type": "integer"}},
        "required": ["name", "born"],
    }
    for prompt, schema in (("Describe Ada Lovelace as JSON.", person), ("Plan a trip.", ROUTE_PARAMETERS)):
        response_format = {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema}}
        _, body = chat(server, prompt, response_format=response_format, seed=0)
        value = json.loads(body["choices"][0]["message"]["content"])
        assert list(Draft202012Validator(schema).iter_errors(value)) == []
        assert (value == {"name": "Ada Lovelace", "born": 1815}) == (schema is person)
    _, body = chat(server, "Describe Ada Lovelace as JSON.", response_format={"type": "json_object"})
    assert json.loads(body["choices"][0]["message"]["content"]) == {"name": "Ada Lovelace", "born": 1815}
    _, body = chat(server, CAPITAL_PROMPT, response_format={"type": "json_object"})
    assert json.loads(body["choices"][0]["message"]["content"]) == {"answer": "Paris"}


def test_graded_correctness_nests_across_accuracies(fixtures_dir: Path) -> None:
    key = AnswerKey.load(fixtures_dir)
    graded = [item for item in key.items if item.graded]
    tp8 = get_profile("tp8")
    correct = {}
    for accuracy in (0.3, 0.9):
        simulator = Simulator(dataclasses.replace(tp8, accuracy=accuracy), key, MODEL)
        correct[accuracy] = {item.id for item in graded if simulator.answers_correctly(item, 5)}
    assert correct[0.3] < correct[0.9]
    assert 0.8 < len(correct[0.9]) / len(graded) < 0.97
    wrong = next(item for item in graded if item.id.startswith("sum-") and item.id not in correct[0.9])
    reply = Simulator(tp8, key, MODEL).complete({"messages": [{"role": "user", "content": wrong.prompt}], "seed": 5})
    assert reply.content not in (None, wrong.reply)


def test_fixtures_dir_can_be_overridden_by_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("K3_FIXTURES_DIR", str(tmp_path))
    assert default_fixtures_dir() == tmp_path
    monkeypatch.delenv("K3_FIXTURES_DIR")
    assert default_fixtures_dir() == REPO_ROOT / "fixtures"


NAMED_MISSING = {"type": "function", "function": {"name": "nope"}}


@pytest.mark.parametrize(
    "fields",
    [
        {"messages": None},
        {"messages": []},
        {"messages": "hello"},
        {"messages": [{"role": "robot", "content": "hi"}]},
        {"messages": [{"role": "user", "content": "hi"}, {"role": "tool", "content": "42"}]},
        {"tools": [function_tool("dup"), function_tool("dup")]},
        {"tools": [function_tool("bad name!")]},
        {"tools": [function_tool("x" * 65)]},
        {"tools": TOOLS, "tool_choice": "sometimes"},
        {"tool_choice": "required"},
        {"tools": [], "tool_choice": "required"},
        {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}},
        {"tools": TOOLS, "tool_choice": NAMED_MISSING},
        {"reasoning_effort": "medium"},
        {"chat_template_kwargs": {"thinking_effort": "extreme"}},
        {"thinking": {"type": "enabled", "effort": "none"}},
        {"temperature": 2.5},
        {"temperature": -0.1},
        {"top_p": 0},
        {"top_p": 1.5},
        {"max_tokens": 0},
        {"max_completion_tokens": -3},
        {"n": 2},
        {"response_format": {"type": "xml"}},
        {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
        {"stream_options": {"include_usage": True}},
        {"messages": [{"role": "assistant", "content": None, "tool_calls": "nope"}, {"role": "user", "content": "hi"}]},
        # A history turn with a null reasoning (llama.cpp answers it with HTTP 500).
        {
            "messages": [
                {"role": "assistant", "content": "ok", "reasoning_content": None},
                {"role": "user", "content": "hi"},
            ]
        },
        {
            "tools": [function_tool("remote", {"properties": {"x": {"$ref": "https://x.org/s.json"}}})],
            "tool_choice": "required",
        },
        {"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 5}}}},
        {"stream": False, "stream_options": {"include_usage": True}},
    ],
)
def test_invalid_requests_get_400_with_an_error_body(server: RunningServer, fields: dict[str, Any]) -> None:
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], **fields}
    status, raw = http("POST", server.url + "/chat/completions", body)
    assert status == 400
    error = json.loads(raw)["error"]
    assert error["type"] == "invalid_request_error" and error["message"]


def test_wrong_model_is_404_model_not_found(server: RunningServer) -> None:
    status, body = chat(server, model="gpt-4o")
    assert status == 404
    assert body["error"]["code"] == "model_not_found" and MODEL in body["error"]["message"]


def test_malformed_json_and_unknown_routes_get_json_errors(server: RunningServer) -> None:
    status, raw = http("POST", server.url + "/chat/completions", b"{not json")
    assert status == 400 and json.loads(raw)["error"]["message"]
    status, raw = http("GET", root(server) + "/no/such/route")
    assert status == 404 and json.loads(raw)["error"]["message"]


def test_api_key_is_required_on_v1_routes(keyed_server: RunningServer) -> None:
    url = keyed_server.url + "/models"
    for headers in ({}, {"Authorization": "Bearer wrong"}):
        status, raw = http("GET", url, headers=headers)
        assert status == 401
        assert json.loads(raw)["error"]["code"] == "invalid_api_key" and b"sk-test-secret" not in raw
    assert http("GET", url, headers={"Authorization": "Bearer sk-test-secret"})[0] == 200
    keyed = openai.OpenAI(base_url=keyed_server.url, api_key="sk-test-secret", max_retries=0)
    assert keyed.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": CAPITAL_PROMPT}]).choices


def test_server_info_and_version_admit_to_being_a_simulator(keyed_server: RunningServer) -> None:
    assert http("GET", root(keyed_server) + "/health")[0] == 200
    status, raw = http("GET", root(keyed_server) + "/get_server_info")
    assert status == 200 and b"sk-test-secret" not in raw
    info = json.loads(raw)
    assert info["simulator"] is True and "simulator" in info["warning"]
    assert info["reasoning_parser"] == info["tool_call_parser"] == "kimi_k3"
    assert "simulator" in json.loads(http("GET", root(keyed_server) + "/version")[1])["version"]


def test_latency_delays_the_response(fixtures_dir: Path) -> None:
    with start_in_thread(get_profile("tp8"), fixtures_dir=fixtures_dir, latency_s=0.3) as slow:
        started = time.perf_counter()
        assert chat(slow, CAPITAL_PROMPT)[0] == 200
        assert time.perf_counter() - started >= 0.3


def test_output_bytes_pads_the_reasoning_at_every_effort_within_the_budget(
    server: RunningServer, fixtures_dir: Path
) -> None:
    target = 100_000
    _, short = chat(server, CAPITAL_PROMPT, reasoning_effort="low", max_tokens=40_000)
    assert len(short["choices"][0]["message"]["reasoning_content"].encode()) < 2_000
    with start_in_thread(get_profile("tp8"), fixtures_dir=fixtures_dir, output_bytes=target) as padded:
        for effort in ("low", "max"):
            _, body = chat(padded, CAPITAL_PROMPT, reasoning_effort=effort, max_tokens=40_000)
            message, usage = body["choices"][0]["message"], body["usage"]
            # The simulator varies reasoning lengths by up to 20% either way around the mean.
            assert 0.75 * target < len(message["reasoning_content"].encode()) < 1.25 * target
            assert (message["content"], body["choices"][0]["finish_reason"]) == ("Paris", "stop")
            assert usage["completion_tokens_details"]["reasoning_tokens"] == len(message["reasoning_content"].split())
        _, cut = chat(padded, CAPITAL_PROMPT, max_tokens=4096)
        assert cut["choices"][0]["finish_reason"] == "length" and cut["usage"]["completion_tokens"] == 4096


@pytest.mark.parametrize("stop_by", ["stdin_eof", "sigterm"])
def test_serve_prints_the_url_first_and_shuts_down_cleanly(stop_by: str) -> None:
    code = (
        "from k3conformance.reference.server import serve\n"
        "from k3conformance.reference.profiles import get_profile\n"
        "serve(profile=get_profile('tp8'), exit_with_stdin=True)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
    )
    try:
        assert process.stdout is not None and process.stdin is not None and process.stderr is not None
        url = process.stdout.readline().decode().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", url)
        assert http("GET", url + "/models")[0] == 200
        if stop_by == "stdin_eof":
            process.stdin.close()
        else:
            process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=20) == 0
        assert "simulator" in process.stderr.read().decode()
    finally:
        process.kill()
        process.wait()


def test_tokenize_counts_what_usage_counts(server: RunningServer) -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Weather in Oslo?"}], "tools": tools}
    status, raw = http("POST", server.url + "/chat/completions", body)
    assert status == 200
    usage = json.loads(raw)["usage"]["prompt_tokens"]
    root = server.url.removesuffix("/v1")
    for url in (root + "/tokenize", server.url + "/tokenize"):
        status, raw = http("POST", url, body)
        assert status == 200
        answer = json.loads(raw)
        assert answer["count"] == len(answer["tokens"]) == usage
    status, raw = http("POST", root + "/tokenize", {"prompt": "one two three"})
    assert json.loads(raw)["count"] == 3


@pytest.mark.parametrize(
    ("fields", "effort"),
    [
        ({}, "max"),
        ({"reasoning_effort": "low"}, "low"),
        ({"thinking": {"effort": "low"}, "reasoning_effort": "max"}, "low"),
        ({"chat_template_kwargs": {"thinking_effort": "high"}, "reasoning_effort": "low"}, "high"),
    ],
)
def test_the_effort_field_wins_over_reasoning_effort(fields: dict[str, Any], effort: str) -> None:
    from k3conformance.reference.request import parse_request

    request = parse_request({"messages": [{"role": "user", "content": "hi"}], **fields}, MODEL)
    assert (request.effort, request.thinking, request.keep_reasoning) == (effort, True, True)


@pytest.mark.parametrize(
    "fields",
    [
        {"thinking": {"type": "disabled", "keep": "none", "effort": "high"}},
        {"thinking": False},
        {"chat_template_kwargs": {"thinking": False}},
        {"reasoning_effort": "none"},
    ],
)
def test_thinking_switched_off(fields: dict[str, Any]) -> None:
    from k3conformance.reference.request import parse_request

    assert not parse_request({"messages": [{"role": "user", "content": "hi"}], **fields}, MODEL).thinking
