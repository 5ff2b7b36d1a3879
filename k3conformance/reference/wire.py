"""A Completion as SGLang/vLLM put it on the wire: a chat.completion object or SSE chunk frames."""

from __future__ import annotations

import json
from collections.abc import Iterator
from json.encoder import encode_basestring_ascii as encode_json_string
from typing import Any

from k3conformance.reference import faults as fault_hooks
from k3conformance.reference.prose import chunk_words
from k3conformance.reference.values import Completion, ToolCall

# SGLang's name for the reasoning field (vLLM has used both this and `reasoning`).
REASONING_FIELD = "reasoning_content"
WORDS_PER_DELTA = 4


def usage_object(completion: Completion) -> dict[str, Any]:
    return {
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "total_tokens": completion.prompt_tokens + completion.completion_tokens,
        "completion_tokens_details": {"reasoning_tokens": completion.reasoning_tokens},
    }


def _tool_call_object(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def completion_object(
    completion: Completion, *, response_id: str, created: int, model: str, faults: frozenset[str]
) -> dict[str, Any]:
    message = {
        "role": "assistant",
        "content": completion.content,
        REASONING_FIELD: completion.reasoning or None,
        "tool_calls": [_tool_call_object(call) for call in completion.tool_calls] or None,
    }
    choice = {
        "index": 0,
        "message": fault_hooks.on_message(faults, message),
        "logprobs": None,
        "finish_reason": completion.finish_reason,
    }
    return {
        "id": response_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [choice],
        "usage": usage_object(completion),
    }


def stream_frames(
    completion: Completion,
    *,
    response_id: str,
    created: int,
    model: str,
    include_usage: bool,
    faults: frozenset[str],
) -> Iterator[str]:
    return fault_hooks.on_stream(faults, _healthy_frames(completion, response_id, created, model, include_usage))


def _healthy_frames(
    completion: Completion, response_id: str, created: int, model: str, include_usage: bool
) -> Iterator[str]:
    # Long outputs make thousands of frames, so everything constant about a frame is
    # encoded once and each frame only encodes its own text.
    envelope = json.dumps({"id": response_id, "object": "chat.completion.chunk", "created": created, "model": model})
    choice_head = f'data: {envelope[:-1]},"choices":[{{"index":0,"delta":'

    def frame(delta_json: str, finish_reason: str | None = None) -> str:
        return f'{choice_head}{delta_json},"logprobs":null,"finish_reason":{json.dumps(finish_reason)}}}]}}\n\n'

    yield frame('{"role":"assistant"}')
    text_tail = '},"logprobs":null,"finish_reason":null}]}\n\n'
    reasoning_head = f'{choice_head}{{"{REASONING_FIELD}":'
    for piece in chunk_words(completion.reasoning, WORDS_PER_DELTA):
        yield reasoning_head + encode_json_string(piece) + text_tail
    if completion.content is not None:
        content_head = f'{choice_head}{{"content":'
        for piece in chunk_words(completion.content, WORDS_PER_DELTA) or [""]:
            yield content_head + encode_json_string(piece) + text_tail
    # K3's tool-call parser only emits a call once its arguments are complete.
    for index, call in enumerate(completion.tool_calls):
        yield frame(json.dumps({"tool_calls": [{"index": index, **_tool_call_object(call)}]}))
    yield frame("{}", completion.finish_reason)
    if include_usage:
        yield f'data: {envelope[:-1]},"choices":[],"usage":{json.dumps(usage_object(completion))}}}\n\n'
    yield "data: [DONE]\n\n"
