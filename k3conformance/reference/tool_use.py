"""Which tools the simulator calls, and with what arguments, for a given tool_choice."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from k3conformance.reference.faults import arguments_schema, grammar_arguments
from k3conformance.reference.schema_values import example_value
from k3conformance.reference.values import ChatRequest, FixtureItem, ToolSpec

PlannedCall = tuple[str, Mapping[str, Any]]


def _name_words(name: str) -> set[str]:
    # get_weather, get-weather and getWeather all mean the words {get, weather}.
    return {word.lower() for word in re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", name)}


def _prompt_words(prompt: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", prompt.lower()))


def _all_name_words_in(name: str, words: set[str]) -> bool:
    name_words = _name_words(name)
    return bool(name_words) and name_words <= words


def plan_tool_calls(
    request: ChatRequest, prompt: str, item: FixtureItem | None, faults: frozenset[str] = frozenset()
) -> list[PlannedCall]:
    """The calls the model makes, with the arguments the deployment's tool-call grammar lets it write."""
    strict = {tool.name for tool in request.tools if tool.strict}
    return [
        (name, grammar_arguments(faults, name in strict, arguments))
        for name, arguments in _intended_calls(request, prompt, item, faults)
    ]


def _intended_calls(
    request: ChatRequest, prompt: str, item: FixtureItem | None, faults: frozenset[str]
) -> list[PlannedCall]:
    mode = request.tool_choice
    after_tool_result = request.messages[-1].get("role") == "tool"
    if mode == "none" or (mode == "auto" and after_tool_result):
        return []
    declared = {tool.name: tool for tool in request.tools}
    expected = [call for call in (item.tool_calls if item else ()) if call.name in declared]
    if mode == "named":
        assert request.named_tool is not None  # request validation guarantees a declared name
        fixture_arguments = next((call.arguments for call in expected if call.name == request.named_tool), None)
        tool = declared[request.named_tool]
        if fixture_arguments is not None:
            return [(tool.name, fixture_arguments)]
        return [(tool.name, example_value(arguments_schema(faults, tool.parameters)))]
    if expected:
        return [(call.name, call.arguments) for call in expected]
    words = _prompt_words(prompt)
    chosen: ToolSpec | None
    if mode == "required":
        # max() keeps the first of equal scores, so zero overlap falls back to the first tool.
        chosen = max(request.tools, key=lambda tool: len(_name_words(tool.name) & words))
    else:
        chosen = next((tool for tool in request.tools if _all_name_words_in(tool.name, words)), None)
    return [] if chosen is None else [(chosen.name, example_value(arguments_schema(faults, chosen.parameters)))]
