"""Tool-call scoring (k3conformance.scoring.call_matching) and the tool-call fixtures it scores against:
fixtures/tool_calls.json (authored) and fixtures/bfcl.json (built from BFCL by build_bfcl.py)."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from jsonschema import Draft202012Validator, SchemaError

from k3conformance.datasets.bundled import load_fixture
from k3conformance.reference import AnswerKey, Simulator, get_profile
from k3conformance.scoring.call_matching import (
    MatchResult,
    SchemaAccuracy,
    TriggerCounts,
    expected_calls_match,
    match_ground_truth,
    parse_arguments,
    schema_errors,
)

REPO = Path(__file__).resolve().parents[3]
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
AUTHORED_CATEGORIES = {"simple", "parallel", "irrelevance", "edge", "round_trip", "named"}


# ---------------------------------------------------------------- parse_arguments


def test_parse_arguments_returns_the_object() -> None:
    assert parse_arguments('{"city": "Zürich", "days": 3}') == ({"city": "Zürich", "days": 3}, None)


@pytest.mark.parametrize(
    ("raw", "error_start"),
    [
        (None, "arguments are missing"),
        ("", "arguments are not valid JSON"),
        ('{"city": "Paris"', "arguments are not valid JSON"),
        ("{'city': 'Paris'}", "arguments are not valid JSON"),
        ('{"x": NaN}', "arguments are not valid JSON: NaN is not valid JSON"),
        ('["Paris"]', "arguments must be a JSON object, got array"),
        ('"Paris"', "arguments must be a JSON object, got string"),
        ("null", "arguments must be a JSON object, got null"),
    ],
)
def test_parse_arguments_explains_what_is_wrong(raw: str | None, error_start: str) -> None:
    value, error = parse_arguments(raw)
    assert value is None
    assert error is not None and error.startswith(error_start)


# ---------------------------------------------------------------- schema_errors

ORDER_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "$defs": {
        "line": {
            "type": "object",
            "properties": {"sku": {"type": "string"}, "quantity": {"type": "integer", "minimum": 1}},
            "required": ["sku", "quantity"],
        }
    },
    "properties": {
        "invoice": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
        "level": {"type": "string", "enum": ["debug", "info"]},
        "lines": {"type": "array", "items": {"$ref": "#/$defs/line"}},
    },
    "required": ["invoice"],
    "additionalProperties": False,
}


def test_schema_errors_is_empty_for_valid_arguments() -> None:
    arguments = {"invoice": "INV-7", "level": "info", "lines": [{"sku": "KB-200", "quantity": 3}]}
    assert schema_errors(ORDER_PARAMETERS, arguments) == []


def test_schema_errors_follows_ref_into_defs_and_names_the_path() -> None:
    errors = schema_errors(ORDER_PARAMETERS, {"invoice": 7, "lines": [{"sku": "KB-200", "quantity": "3"}]})
    assert errors == ["$.lines[0].quantity: '3' is not of type 'integer'"]


def test_schema_errors_reports_anyof_enum_missing_and_extra_properties() -> None:
    errors = schema_errors(ORDER_PARAMETERS, {"invoice": 7.5, "level": "trace", "colour": "red"})
    assert "$.invoice: 7.5 is not valid under any of the given schemas" in errors
    assert "$.level: 'trace' is not one of ['debug', 'info']" in errors
    assert any(error.startswith("$: Additional properties are not allowed ('colour'") for error in errors)
    assert schema_errors(ORDER_PARAMETERS, {}) == ["$: 'invoice' is a required property"]


def test_schema_errors_refuses_an_invalid_schema() -> None:
    with pytest.raises(SchemaError):
        schema_errors({"type": "dict"}, {})
    with pytest.raises(SchemaError):  # every time: a compiled schema is kept, a refusal is not
        schema_errors({"type": "dict"}, {})


def test_schema_errors_follows_the_schema_s_content_not_the_object() -> None:
    """Compiled schemas are kept by their canonical JSON: the same schema written in another
    key order is the same, and a schema changed in place is judged as it is now."""
    schema: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert schema_errors(schema, {"n": "1"}) == ["$.n: '1' is not of type 'integer'"]
    reordered = {"properties": {"n": {"type": "integer"}}, "type": "object"}
    assert schema_errors(reordered, {"n": "1"}) == ["$.n: '1' is not of type 'integer'"]
    schema["properties"]["n"]["type"] = "string"
    assert schema_errors(schema, {"n": "1"}) == []


# ---------------------------------------------------------------- match_ground_truth

# BFCL's answer shape: {function: {parameter: [allowed values]}}.
GroundTruth = dict[str, dict[str, list[Any]]]

WEATHER_ANSWER: GroundTruth = {
    "get_weather": {"city": ["Paris", "Paris, France"], "days": [3], "units": ["celsius", ""]}
}


def test_ground_truth_match() -> None:
    assert match_ground_truth([WEATHER_ANSWER], [("get_weather", {"city": "Paris", "days": 3})]) == MatchResult(True)
    assert match_ground_truth([], [])


@pytest.mark.parametrize(
    ("calls", "reason"),
    [
        ([], "expected 1 call, got 0"),
        (
            [("get_forecast", {"city": "Paris", "days": 3})],
            "wrong function name: expected get_weather, got get_forecast",
        ),
        ([("get_weather", {"city": "Paris"})], "missing required parameter 'days'"),
        ([("get_weather", {"city": "Paris", "days": 3, "lang": "fr"})], "unexpected parameter 'lang'"),
        (
            [("get_weather", {"city": "Lyon", "days": 3})],
            "parameter 'city': got 'Lyon', allowed ['Paris', 'Paris, France']",
        ),
        ([("get_weather", {"city": "Paris", "days": "3"})], "parameter 'days': got '3', allowed [3]"),
    ],
)
def test_ground_truth_mismatch_reasons(calls: list[tuple[str, dict[str, Any]]], reason: str) -> None:
    assert match_ground_truth([WEATHER_ANSWER], calls) == MatchResult(False, reason)


def test_ground_truth_counts_calls() -> None:
    calls = [("get_weather", {"city": "Paris", "days": 3})]
    assert match_ground_truth([WEATHER_ANSWER, WEATHER_ANSWER], calls).reason == "expected 2 calls, got 1"


def test_ground_truth_omittable_parameter_may_be_left_out_or_given() -> None:
    assert match_ground_truth([WEATHER_ANSWER], [("get_weather", {"city": "Paris", "days": 3, "units": "celsius"})])
    wrong_units = match_ground_truth(
        [WEATHER_ANSWER], [("get_weather", {"city": "Paris", "days": 3, "units": "kelvin"})]
    )
    assert wrong_units.reason == "parameter 'units': got 'kelvin', allowed ['celsius', '']"


def test_ground_truth_strings_are_compared_the_bfcl_way() -> None:
    answer: GroundTruth = {"find": {"place": ["San Francisco, CA"], "date": ["April 1, 2024"]}}
    assert match_ground_truth([answer], [("find", {"place": "san francisco ca", "date": "April 1 2024"})])
    assert not match_ground_truth([answer], [("find", {"place": "San Jose, CA", "date": "April 1, 2024"})])


def test_ground_truth_accepts_int_for_float_but_not_bool_for_int() -> None:
    answer: GroundTruth = {"area": {"radius": [5.0], "count": [1]}}
    assert match_ground_truth([answer], [("area", {"radius": 5, "count": 1})])
    assert match_ground_truth([answer], [("area", {"radius": 5, "count": True})]).reason == (
        "parameter 'count': got True, allowed [1]"
    )


def test_ground_truth_lists_and_dicts_are_compared_element_wise() -> None:
    answer: GroundTruth = {
        "route": {
            "stops": [["Santa Barbara", "Monterey"], ["Monterey", "Santa Barbara"]],
            "budget": [{"min": [300000], "max": [400000], "currency": ["USD", ""]}],
        }
    }
    stops_and_budget = {"stops": ["monterey", "santa barbara"], "budget": {"min": 300000, "max": 400000.0}}
    assert match_ground_truth([answer], [("route", stops_and_budget)])
    assert not match_ground_truth([answer], [("route", {**stops_and_budget, "stops": ["Monterey"]})])
    assert not match_ground_truth([answer], [("route", {**stops_and_budget, "budget": {"min": 300000}})])
    extra_key = {**stops_and_budget, "budget": {"min": 300000, "max": 400000, "tax": 0}}
    assert not match_ground_truth([answer], [("route", extra_key)])


def test_ground_truth_parallel_calls_match_in_any_order() -> None:
    answers: list[GroundTruth] = [
        {"play": {"artist": ["Taylor Swift"], "minutes": [20]}},
        {"play": {"artist": ["Maroon 5"], "minutes": [15]}},
    ]
    calls = [("play", {"artist": "Maroon 5", "minutes": 15}), ("play", {"artist": "Taylor Swift", "minutes": 20})]
    assert match_ground_truth(answers, calls)


def test_ground_truth_parallel_match_is_an_assignment_not_first_come() -> None:
    # The first answer accepts either call; taking the first call for it would strand the second answer.
    answers: list[GroundTruth] = [{"f": {"x": [1, 2]}}, {"f": {"x": [1]}}]
    assert match_ground_truth(answers, [("f", {"x": 1}), ("f", {"x": 2})])


def test_ground_truth_parallel_failure_names_the_unmatched_answer() -> None:
    answers: list[GroundTruth] = [{"play": {"artist": ["Taylor Swift"]}}, {"play": {"artist": ["Maroon 5"]}}]
    result = match_ground_truth(answers, [("play", {"artist": "Taylor Swift"}), ("play", {"artist": "Coldplay"})])
    assert result.reason == "expected call 2 of 2: parameter 'artist': got 'Coldplay', allowed ['Maroon 5']"


# ---------------------------------------------------------------- expected_calls_match


def test_expected_calls_match_exactly_in_any_order() -> None:
    expected = [
        {"name": "get_weather", "arguments": {"city": "Oslo"}},
        {"name": "get_stock_price", "arguments": {"symbol": "TSLA"}},
    ]
    assert expected_calls_match(expected, [("get_stock_price", {"symbol": "TSLA"}), ("get_weather", {"city": "Oslo"})])
    assert expected_calls_match([], [])


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ({"days": 3.0, "nonstop": True, "city": "Zürich"}, None),
        ({"days": "3", "nonstop": True, "city": "Zürich"}, "parameter 'days': got '3', expected 3"),
        ({"days": 3, "nonstop": 1, "city": "Zürich"}, "parameter 'nonstop': got 1, expected True"),
        ({"days": 3, "nonstop": True, "city": "zürich"}, "parameter 'city': got 'zürich', expected 'Zürich'"),
        ({"days": 3, "nonstop": True}, "missing required parameter 'city'"),
        ({"days": 3, "nonstop": True, "city": "Zürich", "x": None}, "unexpected parameter 'x'"),
    ],
)
def test_expected_calls_keep_json_types(arguments: dict[str, Any], reason: str | None) -> None:
    expected = [{"name": "f", "arguments": {"days": 3, "nonstop": True, "city": "Zürich"}}]
    assert expected_calls_match(expected, [("f", arguments)]).reason == reason


def test_expected_calls_report_name_and_count() -> None:
    expected = [{"name": "f", "arguments": {}}]
    assert expected_calls_match(expected, [("g", {})]).reason == "wrong function name: expected f, got g"
    assert expected_calls_match(expected, []).reason == "expected 1 call, got 0"


# ---------------------------------------------------------------- trigger and schema metrics


def test_trigger_counts_precision_recall_f1() -> None:
    counts = TriggerCounts()
    outcomes = [(True, True)] * 3 + [(False, True)] + [(True, False)] * 2 + [(False, False)] * 4
    for expected_call, made_call in outcomes:
        counts.add(expected_call, made_call)
    assert counts == TriggerCounts(true_positive=3, false_positive=1, false_negative=2, true_negative=4)
    assert counts.precision == pytest.approx(0.75)
    assert counts.recall == pytest.approx(0.6)
    assert counts.f1 == pytest.approx(2 * 0.75 * 0.6 / (0.75 + 0.6))


def test_trigger_counts_undefined_without_positives() -> None:
    counts = TriggerCounts(true_negative=5)
    assert (counts.precision, counts.recall, counts.f1) == (None, None, None)
    never_calls = TriggerCounts(false_negative=2)
    assert (never_calls.precision, never_calls.recall, never_calls.f1) == (None, 0.0, 0.0)


def test_schema_accuracy() -> None:
    assert SchemaAccuracy().accuracy is None
    accuracy = SchemaAccuracy()
    for valid in (True, True, False, True):
        accuracy.add(valid)
    assert (accuracy.valid_calls, accuracy.calls, accuracy.accuracy) == (3, 4, 0.75)


# ---------------------------------------------------------------- the fixtures


@cache
def fixture_document(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(load_fixture(name).path.read_text(encoding="utf-8"))
    return document


def authored_tools(item: Mapping[str, Any]) -> list[dict[str, Any]]:
    tools_by_name = fixture_document("tool_calls")["tools"]
    return [tools_by_name[name] for name in item["tools"]]


def item_tools(name: str, item: Mapping[str, Any]) -> list[dict[str, Any]]:
    return authored_tools(item) if name == "tool_calls" else list(item["tools"])


def simulator_calls(item: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(call["name"], call["arguments"]) for call in item["simulator"].get("tool_calls", ())]


def items_of(name: str) -> list[Any]:
    return [pytest.param(item, id=item["id"]) for item in load_fixture(name).items]


def check_tools_and_calls(tools: Sequence[Mapping[str, Any]], calls: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
    names = [tool["function"]["name"] for tool in tools]
    assert len(set(names)) == len(names), f"duplicate tool names {names}"
    for tool in tools:
        assert tool["type"] == "function" and TOOL_NAME.match(tool["function"]["name"])
        Draft202012Validator.check_schema(tool["function"]["parameters"])
    parameters = {tool["function"]["name"]: tool["function"]["parameters"] for tool in tools}
    for name, arguments in calls:
        assert name in parameters, f"{name} is not declared"
        assert schema_errors(parameters[name], arguments) == []


@pytest.mark.parametrize("item", items_of("tool_calls"))
def test_authored_item_is_consistent(item: dict[str, Any]) -> None:
    assert item["category"] in AUTHORED_CATEGORIES
    assert item["simulator"]["graded"] is False
    assert item["simulator"]["tool_calls"] == item["expected_calls"]
    check_tools_and_calls(authored_tools(item), simulator_calls(item))
    assert expected_calls_match(item["expected_calls"], simulator_calls(item))
    assert (item["expected_calls"] == []) == (item["category"] == "irrelevance")
    if item["category"] == "round_trip":
        assert item["answer_contains"] in item["tool_result"]


def test_authored_fixture_covers_every_category() -> None:
    document = fixture_document("tool_calls")
    assert document["license"] == "Authored for k3conformance (Apache-2.0)"
    categories = [item["category"] for item in document["items"]]
    assert {category: categories.count(category) for category in AUTHORED_CATEGORIES} == {
        "simple": 8,
        "parallel": 4,
        "irrelevance": 6,
        "round_trip": 4,
        "named": 2,
        "edge": 16,
    }
    assert all(len(item["expected_calls"]) >= 2 for item in document["items"] if item["category"] == "parallel")
    for name, tool in document["tools"].items():
        assert tool["function"]["name"] == name


@pytest.mark.parametrize("item", items_of("bfcl"))
def test_bfcl_item_is_consistent(item: dict[str, Any]) -> None:
    assert item["simulator"]["graded"] is False
    check_tools_and_calls(item["tools"], simulator_calls(item))
    assert match_ground_truth(item["ground_truth"], simulator_calls(item))
    assert (item["ground_truth"] == []) == (item["category"] == "irrelevance")


def test_bfcl_fixture_records_its_source() -> None:
    document = fixture_document("bfcl")
    assert document["license"] == "Apache-2.0, Berkeley Function Calling Leaderboard (ShishirPatil/gorilla)"
    assert document["source"].startswith("bfcl-eval ")
    assert load_fixture("bfcl").path.stat().st_size < 1_000_000


@pytest.mark.parametrize("name", ["tool_calls", "bfcl"])
def test_prompts_are_unique_and_not_inside_one_another(name: str) -> None:
    prompts = [item["prompt"] for item in load_fixture(name).items]
    assert len({item["id"] for item in load_fixture(name).items}) == len(prompts)
    assert_no_prompt_inside_another(prompts)


def test_prompts_do_not_collide_across_tool_fixtures() -> None:
    # The reference simulator looks prompts up across every fixture file at once.
    assert_no_prompt_inside_another(
        [item["prompt"] for name in ("tool_calls", "bfcl") for item in load_fixture(name).items]
    )


def assert_no_prompt_inside_another(prompts: Sequence[str]) -> None:
    ordered = sorted(prompts, key=len)
    for index, prompt in enumerate(ordered):
        holders = [other for other in ordered[index + 1 :] if prompt in other]
        assert not holders, f"{prompt!r} occurs inside {holders[0]!r}"


@pytest.fixture(scope="module")
def reference_simulator() -> Simulator:
    return Simulator(get_profile("tp8"), AnswerKey.load(REPO / "fixtures"), "kimi-k3-simulator")


@pytest.mark.parametrize("name", ["tool_calls", "bfcl"])
def test_reference_simulator_answers_each_item_with_its_calls(name: str, reference_simulator: Simulator) -> None:
    # A conformance suite run against the reference deployment must pass: irrelevance
    # prompts must not trip its name-matching fallback, and call items must be found.
    for item in load_fixture(name).items:
        body = {"messages": [{"role": "user", "content": item["prompt"]}], "tools": item_tools(name, item)}
        completion = reference_simulator.complete(body)
        made = [(call.name, json.loads(call.arguments)) for call in completion.tool_calls]
        assert made == simulator_calls(item), item["id"]


def authored_items(category: str) -> list[dict[str, Any]]:
    return [item for item in load_fixture("tool_calls").items if item["category"] == category]


def test_reference_simulator_uses_the_tool_result_in_round_trips(reference_simulator: Simulator) -> None:
    for item in authored_items("round_trip"):
        (call,) = item["expected_calls"]
        assistant_call = {
            "id": "functions.call:0",
            "type": "function",
            "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
        }
        messages = [
            {"role": "user", "content": item["prompt"]},
            {"role": "assistant", "content": None, "tool_calls": [assistant_call]},
            {"role": "tool", "tool_call_id": "functions.call:0", "content": item["tool_result"]},
        ]
        completion = reference_simulator.complete({"messages": messages, "tools": authored_tools(item)})
        assert completion.tool_calls == () and item["answer_contains"] in (completion.content or ""), item["id"]


def test_reference_simulator_honours_a_named_tool_choice(reference_simulator: Simulator) -> None:
    for item in authored_items("named"):
        (call,) = item["expected_calls"]
        body = {
            "messages": [{"role": "user", "content": item["prompt"]}],
            "tools": authored_tools(item),
            "tool_choice": {"type": "function", "function": {"name": call["name"]}},
        }
        made = [(made.name, json.loads(made.arguments)) for made in reference_simulator.complete(body).tool_calls]
        assert made == [(call["name"], call["arguments"])], item["id"]


# ---------------------------------------------------------------- build_bfcl.py


@cache
def build_bfcl() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_bfcl", REPO / "fixtures" / "build_bfcl.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_build_bfcl_converts_bfcl_types_and_names() -> None:
    function = {
        "name": "math.factorial",
        "description": "Factorial.",
        "parameters": {
            "type": "dict",
            "properties": {
                "ratio": {"type": "float", "description": "A ratio.", "default": 1.0},
                "pair": {"type": "tuple", "items": {"type": "integer"}},
                "anything": {"type": "any", "optional": True},
                "options": {"type": "dict", "properties": {"mode": {"type": "string", "enum": ["a", "b"]}}},
            },
            "required": ["ratio"],
        },
    }
    tool = build_bfcl().convert_function(function)
    assert tool["function"]["name"] == "math_factorial"
    parameters = tool["function"]["parameters"]
    assert parameters["type"] == "object" and parameters["required"] == ["ratio"]
    properties = parameters["properties"]
    assert properties["ratio"] == {"type": "number", "description": "A ratio.", "default": 1.0}
    assert properties["pair"] == {"type": "array", "items": {"type": "integer"}}
    assert properties["anything"] == {}
    assert properties["options"] == {"type": "object", "properties": {"mode": {"type": "string", "enum": ["a", "b"]}}}
    ground_truth = build_bfcl().convert_ground_truth([{"math.factorial": {"ratio": [2.0]}}])
    assert ground_truth == [{"math_factorial": {"ratio": [2.0]}}]


def test_build_bfcl_simulator_calls_skip_omittable_parameters() -> None:
    tools = [
        {
            "function": {
                "name": "f",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "x": {"type": "array", "items": {"type": "number"}},
                        "budget": {"type": "object"},
                        "unit": {"type": "string"},
                        "flag": {"type": "boolean"},
                    },
                    "required": ["x", "flag"],
                },
            }
        }
    ]
    ground_truth: list[GroundTruth] = [
        {
            "f": {
                "x": ["data['x']", [1, 2]],
                "budget": [{"min": [1], "max": [2, ""]}],
                "unit": ["units", ""],
                "flag": [True, ""],
            }
        }
    ]
    calls = build_bfcl().simulator_calls(ground_truth, tools)
    assert calls == [{"name": "f", "arguments": {"x": [1, 2], "budget": {"min": 1}, "flag": True}}]


def test_build_bfcl_says_when_bfcl_eval_is_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    module = build_bfcl()
    monkeypatch.setattr(module.importlib.util, "find_spec", lambda name: None)
    assert module.main(["--output", "/nonexistent/bfcl.json"]) == 2
    assert "bfcl-eval is not installed" in capsys.readouterr().err


@pytest.mark.skipif(importlib.util.find_spec("bfcl_eval") is None, reason="bfcl-eval is not installed")
def test_build_bfcl_reproduces_the_committed_fixture(tmp_path: Path) -> None:
    if not fixture_document("bfcl")["source"].startswith(f"bfcl-eval {build_bfcl().bfcl_version()},"):
        pytest.skip("the installed bfcl-eval is not the version the fixture was built from")
    output = tmp_path / "bfcl.json"
    assert build_bfcl().main(["--output", str(output)]) == 0
    assert output.read_bytes() == (REPO / "fixtures" / "bfcl.json").read_bytes()


def test_build_bfcl_runs_as_a_script_without_the_package_on_path() -> None:
    # The script is run as `python fixtures/build_bfcl.py`; --help proves it imports standalone.
    result = subprocess.run(
        [sys.executable, str(REPO / "fixtures" / "build_bfcl.py"), "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0 and "--per-category" in result.stdout
