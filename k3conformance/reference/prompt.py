"""What K3's chat template puts in the prompt, as the reference deployment renders it.

The one source of `usage.prompt_tokens` and of the `/tokenize` endpoint, so that the two
agree on a healthy deployment, as SGLang's `/tokenize` (which renders `messages` as for a
chat completion, `serving_tokenize.py`) agrees with its usage. The template renders the
declared tools (the request's and the system messages'), a json_schema response format,
every turn's text and tool calls, and the reasoning of earlier turns when it is kept
(`thinking.keep: "all"`, `chat_template_kwargs.preserve_thinking`); without keep only the
reasoning after the last user message stays (the turn's own tool-call loop).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from k3conformance.reference.values import ChatRequest
from k3conformance.reference.words import count_tokens

# Role markers and separators around each message.
TOKENS_PER_MESSAGE = 4


def message_text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return content if isinstance(content, str) else ""


def history_reasoning(message: Mapping[str, Any]) -> str:
    for field in ("reasoning_content", "reasoning"):
        value = message.get(field)
        if isinstance(value, str):
            return value
    return ""


def _renders_reasoning(request: ChatRequest) -> list[bool]:
    """Per message: whether the template renders its reasoning (assistant turns only)."""
    last_user = max((index for index, m in enumerate(request.messages) if m["role"] == "user"), default=-1)
    return [
        message["role"] == "assistant" and (request.keep_reasoning or index > last_user)
        for index, message in enumerate(request.messages)
    ]


def rendered_reasoning(request: ChatRequest) -> str:
    """The earlier turns' reasoning that reaches the model: all of it only where it is kept."""
    rendered = _renders_reasoning(request)
    return " ".join(history_reasoning(m) for m, shown in zip(request.messages, rendered, strict=True) if shown)


def rendered_prompt(request: ChatRequest, *, with_tools: bool = True) -> str:
    parts: list[str] = []
    if with_tools and request.tools:
        parts.append(json.dumps([{"name": tool.name, "parameters": tool.parameters} for tool in request.tools]))
    response_format = request.response_format or {}
    if response_format.get("type") == "json_schema":
        parts.append(json.dumps(response_format["json_schema"]["schema"]))
    for message, shows_reasoning in zip(request.messages, _renders_reasoning(request), strict=True):
        if shows_reasoning:
            parts.append(history_reasoning(message))
        parts.append(message_text(message))
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call.get("function"), dict) else {}
            parts.append(f"{function.get('name', '')} {function.get('arguments', '')}")
    return "\n".join(part for part in parts if part)


def prompt_tokens(request: ChatRequest, *, with_tools: bool = True) -> int:
    return count_tokens(rendered_prompt(request, with_tools=with_tools)) + TOKENS_PER_MESSAGE * len(request.messages)
