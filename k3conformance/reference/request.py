"""Validation of a chat completion request body, rejecting what SGLang/vLLM reject with a 4xx,
and K3's request contract as the healthy deployment implements it.

Sources (read, not copied): SGLang 0.5.23 `entrypoints/openai/serving_chat.py` (K3
encoding: `reasoning_effort` reaches the template only when `chat_template_kwargs` has no
`thinking_effort`; `messages[].tools` on system/developer messages join the request's
tools; tool names unique across both) and `protocol.py` (`reasoning_effort: "none"` turns
thinking off); Moonshot's Kimi-Vendor-Verifier `tests/k3_features` (the official API:
`thinking.effort` wins over `reasoning_effort`, `type` defaults to enabled, effort to max,
`keep` ignored when disabled, dynamic tools only on system messages with empty content,
response_format 400s) and `tests/params` (sampling parameters locked).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping
from typing import Any

from k3conformance.reference import faults as fault_hooks
from k3conformance.reference.values import ChatRequest, InvalidRequest, Problem, Sampling, ToolSpec

ROLES = ("system", "developer", "user", "assistant", "tool")
EFFORTS = ("low", "high", "max")
TOOL_CHOICE_MODES = ("auto", "none", "required")
RESPONSE_FORMATS = ("text", "json_object", "json_schema")
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# Moonshot's rule for names (KVV test_dynamic_tools): a letter first, at most 64 characters.
_LEADING_LETTER = re.compile(r"^[A-Za-z_]")
# Roles whose messages may declare tools (SGLang: root, system, developer; KVV: system).
DYNAMIC_TOOL_ROLES = ("system", "developer")
KEEP_ALL = "all"


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
    tools = _all_tools(body.get("tools"), messages, faults)
    tool_choice, named_tool = _tool_choice(body.get("tool_choice"), tools, faults)
    effort, thinking, keep_reasoning = _thinking(body, faults)
    _check_sampling(body, faults)
    sampling = _sampling(body, fault_hooks.sampling_defaults(faults, thinking))
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
        keep_reasoning=keep_reasoning,
        max_tokens=_max_tokens(body),
        response_format=_response_format(body.get("response_format"), faults),
        seed=seed,
        sampling=sampling,
        stop=_stop(body.get("stop")),
    )


def _stop(raw: Any) -> tuple[str, ...]:
    """OpenAI's `stop`: a string or a list of up to four non-empty strings."""
    if raw is None:
        return ()
    values = [raw] if isinstance(raw, str) else raw
    if not isinstance(values, list) or len(values) > 4 or not all(isinstance(v, str) and v for v in values):
        raise _bad("`stop` must be a non-empty string or a list of at most 4 of them", "stop")
    return tuple(values)


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
        if calls and any(not _k3_call_id(call.get("id")) for call in calls):
            _problem(
                faults,
                "foreign-tool-call-id",
                f"messages[{index}] has a tool call id that is not functions.NAME:INDEX",
                f"messages[{index}].tool_calls",
            )
        if message["role"] == "assistant" and isinstance(message.get("content"), list):
            _problem(
                faults,
                "list-content-in-history",
                f"messages[{index}] is an assistant turn whose content is a list of parts",
                f"messages[{index}].content",
            )
        if "tools" in message and not fault_hooks.ignores_dynamic_tools(faults):
            _dynamic_tool_placement(index, message, faults)
        if not isinstance(message.get("content"), (str, list, type(None))):
            raise _bad(f"messages[{index}].content must be a string or a list of parts", f"messages[{index}].content")
    return tuple(raw)


def _k3_call_id(value: Any) -> bool:
    """Whether an id is K3's own `functions.NAME:INDEX`; only a too strict server cares."""
    return isinstance(value, str) and re.fullmatch(r"functions\.[^:]+:\d+", value) is not None


def _dynamic_tool_placement(index: int, message: Mapping[str, Any], faults: frozenset[str]) -> None:
    where = f"messages[{index}].tools"
    if message["role"] not in DYNAMIC_TOOL_ROLES:
        _problem(faults, "dynamic-tools-misplaced", f"{where}: only system messages may declare tools", where)
    elif message.get("content"):
        _problem(faults, "dynamic-tools-misplaced", f"{where}: a message that declares tools has empty content", where)


def _all_tools(raw: Any, messages: tuple[Mapping[str, Any], ...], faults: frozenset[str]) -> tuple[ToolSpec, ...]:
    """The request's tools and the tools its system messages declare (K3's dynamic tools),
    with names unique across both."""
    declarations: list[tuple[str, Any]] = []
    if raw is not None:
        if not isinstance(raw, list):
            raise _bad("`tools` must be a list", "tools")
        declarations += [(f"tools[{index}]", tool) for index, tool in enumerate(raw)]
    if not fault_hooks.ignores_dynamic_tools(faults):
        first_user = next((index for index, message in enumerate(messages) if message["role"] == "user"), len(messages))
        for index, message in enumerate(messages):
            if "tools" not in message or message["role"] not in DYNAMIC_TOOL_ROLES:
                continue
            if not fault_hooks.reads_dynamic_tools_at(faults, index, first_user):
                continue
            dynamic = message["tools"]
            where = f"messages[{index}].tools"
            if not isinstance(dynamic, list):
                _problem(faults, "malformed-dynamic-tool", f"`{where}` must be a list", where)
                continue
            declarations += [(f"{where}[{position}]", tool) for position, tool in enumerate(dynamic)]
    specs: dict[str, ToolSpec] = {}
    for where, tool in declarations:
        spec = _tool_spec(where, tool, faults, dynamic=where.startswith("messages"))
        if spec is None:
            continue
        if spec.name in specs:
            _problem(
                faults,
                "duplicate-tool-name",
                f"{where} duplicates the tool name {spec.name!r}",
                f"{where}.function.name",
            )
        specs[spec.name] = spec
    return tuple(specs.values())


def _tool_spec(where: str, tool: Any, faults: frozenset[str], *, dynamic: bool) -> ToolSpec | None:
    """One declared tool; None where a lenient deployment skips a malformed dynamic declaration."""
    # A malformed dynamic declaration is its own problem, so that a deployment that never
    # validates them (dynamic-tools-unvalidated) shows, apart from global-tool validation.
    malformed: Problem = "malformed-dynamic-tool" if dynamic else "malformed-tool"
    function = tool.get("function") if isinstance(tool, dict) and tool.get("type") == "function" else None
    if not isinstance(function, dict):
        _problem(faults, malformed, f'{where} must be {{"type": "function", "function": {{...}}}}', where)
        return None
    name = function.get("name")
    name_rule = f"{where} name {name!r} must match ^[A-Za-z_][A-Za-z0-9_-]{{0,63}}$"
    if not isinstance(name, str):
        _problem(faults, malformed, name_rule, f"{where}.function.name")
        return None
    if not (_TOOL_NAME.match(name) and _LEADING_LETTER.match(name)):
        _problem(
            faults, "malformed-dynamic-tool" if dynamic else "invalid-tool-name", name_rule, f"{where}.function.name"
        )
    parameters = function.get("parameters") or {"type": "object", "properties": {}}
    if not isinstance(parameters, dict):
        raise _bad(f"{where}.function.parameters must be a JSON schema object", where)
    return ToolSpec(name, parameters, strict=function.get("strict") is True)


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
    if mode in ("auto", "none") and not tools:
        _problem(faults, "tool-choice-without-tools-field", f"`tool_choice` {mode} given without tools", "tool_choice")
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


def _thinking(body: Mapping[str, Any], faults: frozenset[str]) -> tuple[str, bool, bool]:
    """(effort, thinking enabled, earlier reasoning kept) from either form of K3's switch.

    The specific field wins: `thinking.effort` (Kimi's API) or
    `chat_template_kwargs.thinking_effort` (open-source servers), and `reasoning_effort`
    applies only where neither is given (SGLang 0.5.23 serving_chat.py; KVV
    test_reasoning_effort_ignored_when_effort_present). Omitted: `max`, thinking on,
    earlier reasoning kept (KVV: keep defaults to "all")."""
    template_kwargs = body.get("chat_template_kwargs") or {}
    raw_thinking = body.get("thinking")
    if raw_thinking is False:
        raw_thinking = {"type": "disabled"}
    kimi_thinking = raw_thinking or {}
    if not isinstance(template_kwargs, dict) or not isinstance(kimi_thinking, dict):
        raise _bad("`chat_template_kwargs` and `thinking` must be objects", "thinking")
    reasoning_effort = body.get("reasoning_effort")
    if reasoning_effort == "none":  # SGLang (protocol.py): turns thinking off unless the kwargs say otherwise
        reasoning_effort = None
        template_kwargs = {"thinking": False, **template_kwargs}
    specific = kimi_thinking.get("effort", template_kwargs.get("thinking_effort"))
    candidates = fault_hooks.effort_candidates(faults, specific=specific, reasoning_effort=reasoning_effort)
    effort = next((value for value in candidates if value is not None), "max")
    if effort not in EFFORTS:
        raise _bad(f"reasoning effort {effort!r} is not one of {', '.join(EFFORTS)}", "reasoning_effort")
    thinking_type = kimi_thinking.get("type", "enabled")
    if thinking_type not in ("enabled", "disabled"):
        raise _bad('`thinking.type` must be "enabled" or "disabled"', "thinking.type")
    enabled = template_kwargs.get("thinking") is not False and thinking_type == "enabled"
    # `keep` means nothing once thinking is off, so any value is accepted then (KVV test_disabled_ignores_keep).
    keep = kimi_thinking.get("keep", KEEP_ALL) == KEEP_ALL and template_kwargs.get("preserve_thinking") is not False
    return str(effort), fault_hooks.thinking_as_understood(faults, enabled), fault_hooks.keeps_reasoning(faults, keep)


def _number(body: Mapping[str, Any], key: str) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _bad(f"`{key}` must be a number", key)
    return float(value)


# Moonshot's API fixes these (KVV tests/params): each locked parameter, the values it
# accepts, and what the rule says. Open-source servers pass any valid value on, so a
# check of the locks runs only with --k3-vendor.
SAMPLING_LOCKS: tuple[tuple[str, Callable[[float], bool], str], ...] = (
    ("temperature", lambda value: 0.0 <= value <= 1.0, "between 0 and 1"),
    ("top_p", lambda value: value == 0.95, "0.95"),
    ("presence_penalty", lambda value: value == 0.0, "0"),
    ("frequency_penalty", lambda value: value == 0.0, "0"),
)


def _check_sampling(body: Mapping[str, Any], faults: frozenset[str]) -> None:
    temperature = _number(body, "temperature")
    if temperature is not None and not 0.0 <= temperature <= 2.0:
        raise _bad("`temperature` must be between 0 and 2", "temperature")
    top_p = _number(body, "top_p")
    if top_p is not None and not 0.0 < top_p <= 1.0:
        raise _bad("`top_p` must be in (0, 1]", "top_p")
    n = body.get("n")
    if n is not None and (isinstance(n, bool) or n != 1):
        raise _bad("only `n` = 1 is supported", "n")
    for key, allowed, rule in SAMPLING_LOCKS:
        value = _number(body, key)
        if value is not None and not allowed(value):
            _problem(faults, "unlocked-sampling-parameter", f"`{key}` is fixed for this model: {rule}", key)


def _sampling(body: Mapping[str, Any], defaults: Sampling) -> Sampling:
    """The request's sampling parameters, each one it leaves out taken from `defaults`."""
    given = {key: _number(body, key) for key in ("temperature", "top_p", "presence_penalty", "frequency_penalty")}
    return dataclasses.replace(defaults, **{key: value for key, value in given.items() if value is not None})


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


def _response_format(raw: Any, faults: frozenset[str]) -> Mapping[str, Any] | None:
    """`text`, `json_object` or `json_schema` with `name`, an object `schema` and a boolean
    `strict` (KVV test_response_format); a lenient deployment answers the rest as text."""
    if raw is None:
        return None
    problem = _response_format_problem(raw)
    if problem is None:
        valid: Mapping[str, Any] = raw
        return valid
    _problem(faults, "malformed-response-format", problem, "response_format")
    return None


def _response_format_problem(raw: Any) -> str | None:
    if not isinstance(raw, dict) or raw.get("type") not in RESPONSE_FORMATS:
        return f"`response_format.type` must be one of {', '.join(RESPONSE_FORMATS)}"
    if raw["type"] != "json_schema":
        return None
    spec = raw.get("json_schema")
    if not isinstance(spec, dict):
        return "`response_format` json_schema needs a `json_schema` object"
    if not isinstance(spec.get("name"), str) or not spec["name"]:
        return "`response_format.json_schema.name` is required"
    if not isinstance(spec.get("schema"), dict):
        return "`response_format.json_schema.schema` must be a JSON schema object"
    if "strict" in spec and not isinstance(spec["strict"], bool):
        return "`response_format.json_schema.strict` must be a boolean"
    return None
