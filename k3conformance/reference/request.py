"""Validation of a chat completion request body, rejecting what SGLang/vLLM reject with a 4xx."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from k3conformance.reference import faults as fault_hooks
from k3conformance.reference.values import ChatRequest, InvalidRequest, Problem, ToolSpec

ROLES = ("system", "developer", "user", "assistant", "tool")
EFFORTS = ("low", "high", "max")
TOOL_CHOICE_MODES = ("auto", "none", "required")
RESPONSE_FORMATS = ("text", "json_object", "json_schema")
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _bad(message: str, param: str | None = None) -> InvalidRequest:
    return InvalidRequest(400, message, param, None)


def _problem(faults: frozenset[str], problem: Problem, message: str, param: str) -> None:
    """Rejects the request as this deployment does; returns only where it answers the request anyway."""
    status = fault_hooks.rejection_status(faults, problem)
    if status is not None:
        raise InvalidRequest(status, message, param, None)


def parse_request(body: Mapping[str, Any], model_id: str, faults: frozenset[str] = frozenset()) -> ChatRequest:
    model = body.get("model")
    if model is not None and model != model_id:
        raise InvalidRequest(
            404, f"The model `{model}` does not exist; this server serves `{model_id}`.", "model", "model_not_found"
        )
    messages = _messages(body.get("messages"), faults)
    tools = _tools(body.get("tools"), faults)
    tool_choice, named_tool = _tool_choice(body.get("tool_choice"), tools, faults)
    effort, thinking = _thinking(body)
    _check_sampling(body)
    if body.get("stream") not in (None, True, False):
        raise _bad("`stream` must be a boolean", "stream")
    if body.get("stream_options") is not None and body.get("stream") is not True:
        raise _bad("`stream_options` can only be set when `stream` is true", "stream_options")
    seed = body.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise _bad("`seed` must be an integer", "seed")
    return ChatRequest(
        messages=messages,
        tools=tools,
        tool_choice=tool_choice,
        named_tool=named_tool,
        effort=effort,
        thinking=thinking,
        max_tokens=_max_tokens(body),
        response_format=_response_format(body.get("response_format")),
        seed=seed,
    )


def _messages(raw: Any, faults: frozenset[str]) -> tuple[Mapping[str, Any], ...]:
    if not isinstance(raw, list) or not raw:
        raise _bad("`messages` must be a non-empty list", "messages")
    for index, message in enumerate(raw):
        if not isinstance(message, dict):
            raise _bad(f"messages[{index}] must be an object", f"messages[{index}]")
        if message.get("role") not in ROLES:
            raise _bad(
                f"messages[{index}].role is {message.get('role')!r}; expected one of {', '.join(ROLES)}",
                f"messages[{index}].role",
            )
        if message["role"] == "tool" and not message.get("tool_call_id"):
            _problem(
                faults,
                "tool-message-without-id",
                f"messages[{index}] is a tool message without `tool_call_id`",
                f"messages[{index}].tool_call_id",
            )
        if message["role"] == "assistant" and ("reasoning_content" in message or "reasoning" in message):
            _problem(
                faults,
                "reasoning-in-history",
                f"messages[{index}] carries reasoning from an earlier turn, which this server does not accept",
                f"messages[{index}]",
            )
        for field in ("reasoning_content", "reasoning"):
            if field in message and not isinstance(message[field], str):
                # llama.cpp's server fails such a turn with HTTP 500 ("type must be string, but
                # is null"); the reference refuses it cleanly, so a suite that sends one shows.
                raise _bad(f"messages[{index}].{field} must be a string", f"messages[{index}].{field}")
        calls = message.get("tool_calls")
        if calls is not None and not (isinstance(calls, list) and all(isinstance(call, dict) for call in calls)):
            raise _bad(f"messages[{index}].tool_calls must be a list of objects", f"messages[{index}].tool_calls")
        if not isinstance(message.get("content"), (str, list, type(None))):
            raise _bad(f"messages[{index}].content must be a string or a list of parts", f"messages[{index}].content")
    return tuple(raw)


def _tools(raw: Any, faults: frozenset[str]) -> tuple[ToolSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise _bad("`tools` must be a list", "tools")
    specs: dict[str, ToolSpec] = {}
    for index, tool in enumerate(raw):
        function = tool.get("function") if isinstance(tool, dict) and tool.get("type") == "function" else None
        if not isinstance(function, dict):
            raise _bad(f'tools[{index}] must be {{"type": "function", "function": {{...}}}}', f"tools[{index}]")
        name = function.get("name")
        name_rule = f"tools[{index}] name {name!r} must match ^[A-Za-z0-9_-]{{1,64}}$"
        if not isinstance(name, str):
            raise _bad(name_rule, f"tools[{index}].function.name")  # not even a lenient server has a name to use
        if not _TOOL_NAME.match(name):
            _problem(faults, "invalid-tool-name", name_rule, f"tools[{index}].function.name")
        if name in specs:
            _problem(
                faults,
                "duplicate-tool-name",
                f"tools[{index}] duplicates the tool name {name!r}",
                f"tools[{index}].function.name",
            )
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        if not isinstance(parameters, dict):
            raise _bad(f"tools[{index}].function.parameters must be a JSON schema object", f"tools[{index}]")
        specs[name] = ToolSpec(name, parameters)
    return tuple(specs.values())


def _tool_choice(raw: Any, tools: tuple[ToolSpec, ...], faults: frozenset[str]) -> tuple[str, str | None]:
    if raw is None:
        return ("auto" if tools else "none"), None
    if isinstance(raw, str) and raw in TOOL_CHOICE_MODES:
        mode, named = raw, None
    elif isinstance(raw, dict) and raw.get("type") == "function" and isinstance(raw.get("function"), dict):
        mode, named = "named", raw["function"].get("name")
        if not isinstance(named, str):
            raise _bad("`tool_choice.function.name` must be a string", "tool_choice")
    else:
        _problem(
            faults,
            "invalid-tool-choice",
            '`tool_choice` must be "auto", "none", "required" or {"type": "function", "function": {"name": ...}}',
            "tool_choice",
        )
        return ("auto" if tools else "none"), None  # answered anyway: as if tool_choice were absent
    if mode in ("required", "named") and not tools:
        _problem(
            faults, "tool-choice-without-tools", f"`tool_choice` {mode} needs a non-empty `tools` list", "tool_choice"
        )
        return "none", None  # answered anyway: with no tool to call the answer is text
    if named is not None and named not in {tool.name for tool in tools}:
        _problem(
            faults,
            "undeclared-named-tool",
            f"`tool_choice` names the tool {named!r}, which is not in `tools`",
            "tool_choice",
        )
        return "auto", None  # answered anyway: any declared tool may be called
    return mode, named


def _thinking(body: Mapping[str, Any]) -> tuple[str, bool]:
    template_kwargs = body.get("chat_template_kwargs") or {}
    kimi_thinking = body.get("thinking") or {}
    if not isinstance(template_kwargs, dict) or not isinstance(kimi_thinking, dict):
        raise _bad("`chat_template_kwargs` and `thinking` must be objects", "thinking")
    candidates = (body.get("reasoning_effort"), template_kwargs.get("thinking_effort"), kimi_thinking.get("effort"))
    effort = next((value for value in candidates if value is not None), "max")
    if effort not in EFFORTS:
        raise _bad(f"reasoning effort {effort!r} is not one of {', '.join(EFFORTS)}", "reasoning_effort")
    thinking_type = kimi_thinking.get("type", "enabled")
    if thinking_type not in ("enabled", "disabled"):
        raise _bad('`thinking.type` must be "enabled" or "disabled"', "thinking.type")
    enabled = template_kwargs.get("thinking") is not False and thinking_type == "enabled"
    return str(effort), enabled


def _number(body: Mapping[str, Any], key: str) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _bad(f"`{key}` must be a number", key)
    return float(value)


def _check_sampling(body: Mapping[str, Any]) -> None:
    temperature = _number(body, "temperature")
    if temperature is not None and not 0.0 <= temperature <= 2.0:
        raise _bad("`temperature` must be between 0 and 2", "temperature")
    top_p = _number(body, "top_p")
    if top_p is not None and not 0.0 < top_p <= 1.0:
        raise _bad("`top_p` must be in (0, 1]", "top_p")
    n = body.get("n")
    if n is not None and (isinstance(n, bool) or n != 1):
        raise _bad("only `n` = 1 is supported", "n")


def _max_tokens(body: Mapping[str, Any]) -> int | None:
    limits: list[int] = []
    for key in ("max_completion_tokens", "max_tokens"):
        value = body.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise _bad(f"`{key}` must be an integer >= 1", key)
        limits.append(value)
    return min(limits, default=None)


def _response_format(raw: Any) -> Mapping[str, Any] | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or raw.get("type") not in RESPONSE_FORMATS:
        raise _bad(f"`response_format.type` must be one of {', '.join(RESPONSE_FORMATS)}", "response_format")
    if raw["type"] == "json_schema":
        spec = raw.get("json_schema")
        if not isinstance(spec, dict) or not isinstance(spec.get("schema"), dict):
            raise _bad("`response_format` json_schema needs `json_schema.schema`", "response_format")
    return raw
