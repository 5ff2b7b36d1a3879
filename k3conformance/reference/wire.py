"""A SimulatedTurn as SGLang/vLLM put it on the wire: K3's raw output read by the profile's
parser, then a chat.completion object or SSE chunk frames.

What the model says (reasoning, answer, calls, finish reason, token counts) comes from the
simulator; what the client sees of the text comes from running a parser on the raw output,
whole or one seeded streaming step at a time, so that parsing faults are the parser's.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from json.encoder import encode_basestring_ascii as encode_json_string
from typing import Any, Protocol, runtime_checkable

from k3conformance.reference import faults as fault_hooks
from k3conformance.reference.values import SimulatedTurn
from k3conformance.reference.words import count_tokens
from k3conformance.xtml.parsers import Parsed, ParsedCall, WireParser, make_parser
from k3conformance.xtml.writer import render, token_pieces

# SGLang's name for the reasoning field (vLLM has used both this and `reasoning`).
REASONING_FIELD = "reasoning_content"
# Where a parser's own server puts the reasoning when it is not there: vLLM 0.33.0's chat
# messages and deltas have a `reasoning` field and no `reasoning_content`.
_SERVER_REASONING_FIELD = {"vllm": "reasoning"}


def reasoning_field(parser: WireParser) -> str:
    return _SERVER_REASONING_FIELD.get(parser.name, REASONING_FIELD)


@runtime_checkable
class _ConfiguredPerRequest(Protocol):
    """A parser that its server builds for each request from the request's thinking switch
    (vLLM passes chat_template_kwargs to its reasoning parser); the others are built once."""

    def for_request(self, *, thinking: bool) -> WireParser: ...


def _request_parser(parser: WireParser, completion: SimulatedTurn, faults: frozenset[str]) -> WireParser:
    settings = fault_hooks.turn_parser_settings(faults, completion.after_tool_result)
    if settings is not None:
        parser = make_parser(parser.name, settings)
    return parser.for_request(thinking=completion.thinking) if isinstance(parser, _ConfiguredPerRequest) else parser


def raw_output(completion: SimulatedTurn, faults: frozenset[str]) -> str:
    """What the model emits for `completion`, raw-text faults included."""
    return fault_hooks.on_raw(faults, render(completion))


def usage_object(completion: SimulatedTurn, parsed_reasoning: str) -> dict[str, Any]:
    # Servers count reasoning tokens in what their reasoning parser returned.
    return {
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "total_tokens": completion.prompt_tokens + completion.completion_tokens,
        "completion_tokens_details": {"reasoning_tokens": count_tokens(parsed_reasoning)},
    }


def _tool_call_object(completion: SimulatedTurn, position: int, call: ParsedCall) -> dict[str, Any]:
    # Ids are the server's: the parser's where it gives one (vLLM's), else numbered across the conversation.
    ids = completion.tool_calls
    call_id = call.id or (ids[position].id if position < len(ids) else f"functions.{call.name}:{position}")
    return {"id": call_id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}


def _reported_calls(completion: SimulatedTurn, calls: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    # A turn the model ended on a tool call whose calls the parser missed reports an empty list
    # (MoonshotAI Kimi-K2 issue 26); otherwise no calls are reported as null.
    if calls or completion.finish_reason == "tool_calls":
        return calls
    return None


def completion_object(
    completion: SimulatedTurn,
    *,
    response_id: str,
    created: int,
    model: str,
    faults: frozenset[str],
    parser: WireParser,
    parse_tools: bool,
) -> dict[str, Any]:
    parsed = _request_parser(parser, completion, faults).parse(raw_output(completion, faults), tools=parse_tools)
    calls = [_tool_call_object(completion, position, call) for position, call in enumerate(parsed.calls)]
    message = {
        "role": "assistant",
        "content": parsed.content if parsed.content or not calls else None,
        reasoning_field(parser): parsed.reasoning or None,
        "tool_calls": _reported_calls(completion, calls),
    }
    choice = {
        "index": 0,
        "message": fault_hooks.on_message(faults, message),
        "logprobs": None,
        "finish_reason": fault_hooks.reported_finish(faults, completion.finish_reason),
    }
    return {
        "id": response_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [choice],
        "usage": fault_hooks.on_usage(faults, usage_object(completion, parsed.reasoning)),
    }


def stream_frames(
    completion: SimulatedTurn,
    *,
    response_id: str,
    created: int,
    model: str,
    include_usage: bool,
    faults: frozenset[str],
    parser: WireParser,
    parse_tools: bool,
) -> Iterator[str]:
    steps = _parsed_steps(_request_parser(parser, completion, faults), raw_output(completion, faults), parse_tools)
    frames = _frames(completion, steps, response_id, created, model, include_usage, reasoning_field(parser), faults)
    return fault_hooks.on_stream(faults, frames)


def _parsed_steps(parser: WireParser, raw: str, parse_tools: bool) -> Iterator[Parsed]:
    stream = parser.stream(tools=parse_tools)
    for piece in token_pieces(raw):
        yield stream.feed(piece)
    yield stream.finish()


def _frames(
    completion: SimulatedTurn,
    steps: Iterator[Parsed],
    response_id: str,
    created: int,
    model: str,
    include_usage: bool,
    reasoning_name: str,
    faults: frozenset[str],
) -> Iterator[str]:
    # Long outputs make thousands of frames, so everything constant about a frame is
    # encoded once and each frame only encodes its own text.
    envelope = json.dumps({"id": response_id, "object": "chat.completion.chunk", "created": created, "model": model})
    choice_head = f'data: {envelope[:-1]},"choices":[{{"index":0,"delta":'

    def frame(delta_json: str, finish_reason: str | None = None) -> str:
        return f'{choice_head}{delta_json},"logprobs":null,"finish_reason":{json.dumps(finish_reason)}}}]}}\n\n'

    yield frame('{"role":"assistant"}')
    text_tail = '},"logprobs":null,"finish_reason":null}]}\n\n'
    reasoning_head = f'{choice_head}{{"{reasoning_name}":'
    content_head = f'{choice_head}{{"content":'
    reasoning: list[str] = []
    content_sent = False
    calls_sent = 0
    for step in steps:
        if step.reasoning:
            reasoning.append(step.reasoning)
            yield reasoning_head + encode_json_string(step.reasoning) + text_tail
        if step.content:
            content_sent = True
            yield content_head + encode_json_string(step.content) + text_tail
        # K3's tool-call parsers emit a call whole once its block closes.
        for call in step.calls:
            call_object = _tool_call_object(completion, calls_sent, call)
            yield frame(json.dumps({"tool_calls": [{"index": calls_sent, **call_object}]}))
            calls_sent += 1
    if completion.content is not None and not content_sent:
        yield content_head + '""' + text_tail  # an empty answer is still an answer
    if completion.finish_reason == "tool_calls" and not calls_sent:
        yield frame('{"tool_calls":[]}')
    yield frame("{}", fault_hooks.reported_finish(faults, completion.finish_reason))
    if include_usage:
        usage = usage_object(completion, "".join(reasoning))
        yield f'data: {envelope[:-1]},"choices":[],"usage":{json.dumps(usage)}}}\n\n'
    yield "data: [DONE]\n\n"
