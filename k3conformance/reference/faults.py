"""The one place where a profile's deliberate faults change what the reference deployment emits.

Every fault reproduces a real serving bug (catalogue.py names it). Each hook receives
what the healthy deployment would do and returns what a faulty one does instead; each
is called from exactly one place:

- `rejection_status`: request validation, the status for a problem in a request (request.py)
- `on_request`: how a valid request is understood: effort, tool_choice, response_format (simulator.py)
- `first_tool_call_index`: where this turn's tool-call id numbers start (simulator.py)
- `tool_markup_without_tools`: tool calls made when no tools were declared (simulator.py)
- `prefix_cache_for`: the only state kept across requests, owned by the app (app.py)
- `on_completion`: model-level output, the same in both modes: finish reasons, usage,
  tool-call ids (simulator.py)
- `on_raw`: the raw K3 text the model emits, before any parser reads it (wire.py)
- `parser_settings`: how the server's reasoning and tool-call parsers are configured (app.py)
- `on_message` / `on_stream`: the server's non-streaming message and SSE frames (wire.py)
- `reported_finish`, `on_usage`: the finish reason and usage the server reports, both modes (wire.py)
- `turn_parser_settings`: parser settings for one turn instead of the server's own (wire.py)
- `falls_into_loop` / `looping_reasoning`: long outputs that loop until the token limit (simulator.py)
- `drift_onset` / `drifted`: decoding that turns to gibberish past a context length (simulator.py)
- `load_sensitive` / `under_load`, `crashes_under_guided_load` / `carries_strict_schema`: what
  depends on the requests in flight, which the app counts (app.py)

The healthy profile has no faults, and every hook returns at its first test when it has
none, so the healthy path costs nothing and stays byte-identical.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import zlib
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from k3conformance.reference.values import (
    K3_INSTANT_SAMPLING,
    K3_THINKING_SAMPLING,
    ChatRequest,
    FixtureItem,
    Problem,
    Sampling,
    SimulatedTurn,
)
from k3conformance.reference.words import count_tokens, take_tokens
from k3conformance.xtml.markup import (
    MESSAGE_CLOSE,
    RESPONSE_CLOSE,
    RESPONSE_OPEN,
    THINK_CLOSE,
    THINK_OPEN,
    TOOLS_OPEN,
    xtml_tools_block,
)
from k3conformance.xtml.parsers import ParserSettings

# wire.REASONING_FIELD; wire imports this module, so the name is repeated rather than imported.
_REASONING_CONTENT = "reasoning_content"
_VLLM_REASONING = "reasoning"
# K3 ends a turn with token 163586; a server that forgets to map it reports it raw.
_RAW_STOP = "stop_163586"
# SGLang PR 33995: 127 of 700 BEAM answers skipped the think block; the same share of answers
# here, chosen by a hash of the raw output so that a request always fares the same.
_SKIPPED_THINK_SHARE = (127, 700)
# ROCm ATOM 1727: usage.prompt_tokens this many above the server's own count, on every request.
_PROMPT_TOKEN_SKEW = 3
# SGLang PR 32677: the think opener the model re-emits from ordinary text tokens (`<|sep` + `|`),
# which a detector matching the exact marker does not take for one.
_THINK_OPENER_AS_TEXT = "<|open|>think<|sep|"
# vLLM 54701: the streaming tool parser loses calls with this many streams in flight.
LOAD_FAULT_STREAMS = 6
# How long a stream of a load-sensitive profile waits before decoding: the scheduler's batch
# window, in which streams sent together are all in flight (a healthy profile never waits).
LOAD_BATCH_WINDOW_S = 0.05
# A tool call streamed by stream-repeats-tool-name is cut into this many argument deltas.
_ARGUMENT_PIECES = 3


# --- request validation --------------------------------------------------------------

# The healthy answer to each problem; None: the request is valid and answered.
_HEALTHY_STATUS: Mapping[Problem, int | None] = {
    "duplicate-tool-name": 400,
    "invalid-tool-name": 400,
    "tool-message-without-id": 400,
    "invalid-tool-choice": 400,
    "tool-choice-without-tools": 400,
    "undeclared-named-tool": 400,
    "reasoning-in-history": None,  # preserved thinking is part of K3's multi-turn format
    "malformed-tool": 400,
    "malformed-dynamic-tool": 400,
    "dynamic-tools-misplaced": 400,
    # Histories written by other clients: any id format and list content are valid.
    "foreign-tool-call-id": None,
    "list-content-in-history": None,
    # Moonshot's API fixes temperature, top_p and the penalties (KVV tests/params).
    "unlocked-sampling-parameter": 400,
    "malformed-response-format": 400,
    # tool_choice "auto" or "none" needs no tools (KVV test_tool_choice_without_tools_field_accepted).
    "tool-choice-without-tools-field": None,
}
# Faults that change the answer to one kind of problem: fault -> (problem, status; None answers it).
_STATUS_BY_FAULT: Mapping[str, tuple[tuple[Problem, int | None], ...]] = {
    "dynamic-tools-unvalidated": (("malformed-dynamic-tool", None), ("dynamic-tools-misplaced", None)),
    "strict-history-ids": (("foreign-tool-call-id", 400), ("list-content-in-history", 400)),
    "sampling-params-unlocked": (("unlocked-sampling-parameter", None),),
    "response-format-unvalidated": (("malformed-response-format", None),),
    "rejects-tool-choice-without-tools": (("tool-choice-without-tools-field", 400),),
}
# The invalid requests a sloppy validator lets through (lenient-validation) or crashes on (validation-500).
_MALFORMED: frozenset[Problem] = frozenset(
    {"duplicate-tool-name", "invalid-tool-name", "tool-message-without-id", "invalid-tool-choice"}
)


def rejection_status(faults: frozenset[str], problem: Problem) -> int | None:
    """The HTTP status this deployment answers a request having `problem` with; None answers it as if valid."""
    if faults:
        if problem in _MALFORMED and "lenient-validation" in faults:
            return None
        if problem in _MALFORMED and "validation-500" in faults:
            return 500
        if problem == "tool-choice-without-tools" and "required-without-tools-accepted" in faults:
            return None
        if problem == "undeclared-named-tool" and "tool-choice-named-ignored" in faults:
            return None
        if problem == "reasoning-in-history" and "rejects-reasoning-history" in faults:
            return 400
        for fault, answers in _STATUS_BY_FAULT.items():
            if fault in faults:
                for changed, status in answers:
                    if changed == problem:
                        return status
    return _HEALTHY_STATUS[problem]


# --- the thinking switch and dynamic tools (request.py) -----------------------------------


def effort_candidates(faults: frozenset[str], *, specific: Any, reasoning_effort: Any) -> tuple[Any, ...]:
    """The effort values in the order the deployment reads them; the first given wins.

    Healthy: the specific field (thinking.effort, chat_template_kwargs.thinking_effort),
    then reasoning_effort. effort-precedence-inverted lets reasoning_effort override it;
    reasoning-effort-dropped never reads reasoning_effort."""
    if "effort-precedence-inverted" in faults:
        return (reasoning_effort, specific)
    if "reasoning-effort-dropped" in faults:
        return (specific,)
    return (specific, reasoning_effort)


def thinking_as_understood(faults: frozenset[str], enabled: bool) -> bool:
    """thinking-disable-ignored: the server always renders the thinking prompt."""
    return enabled or "thinking-disable-ignored" in faults


def keeps_reasoning(faults: frozenset[str], keep: bool) -> bool:
    """drops-reasoning-history: the template renders earlier turns without their reasoning."""
    return keep and "drops-reasoning-history" not in faults


def ignores_dynamic_tools(faults: frozenset[str]) -> bool:
    """dynamic-tools-ignored: `tools` inside messages is dropped as an unknown field."""
    return "dynamic-tools-ignored" in faults


def structured_json(faults: frozenset[str], value: Any) -> str:
    """The text of a JSON answer under response_format: on one line, as Moonshot's API writes it,
    or (json-output-indented) over several lines, as a grammar that allows any whitespace lets
    the model write it."""
    return json.dumps(value, ensure_ascii=False, indent=2 if "json-output-indented" in faults else None)


def reads_dynamic_tools_at(faults: frozenset[str], index: int, first_user: int) -> bool:
    """dynamic-tools-leading-only: only the system messages before the first user turn declare tools."""
    return "dynamic-tools-leading-only" not in faults or index < first_user


# The keywords a grammar backend that only knows types drops (schema-constraints-dropped).
_CONSTRAINT_KEYWORDS = frozenset(
    {
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "examples",
        "format",
        "minItems",
        "maxItems",
    }
)


def arguments_schema(faults: frozenset[str], schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """The schema the deployment constrains generated arguments with."""
    if "schema-constraints-dropped" not in faults:
        return schema
    return _without_constraints(schema)  # type: ignore[no-any-return]


def _without_constraints(node: Any) -> Any:
    if isinstance(node, dict):
        return {key: _without_constraints(value) for key, value in node.items() if key not in _CONSTRAINT_KEYWORDS}
    if isinstance(node, list):
        return [_without_constraints(value) for value in node]
    return node


# The defaults a server started with its own generation config applies (vLLM
# --generation-config vllm, SGLang --sampling-defaults openai): OpenAI's temperature 1 and top_p 1.
_SERVER_OWN_SAMPLING = Sampling(temperature=1.0, top_p=1.0)


def sampling_defaults(faults: frozenset[str], thinking: bool) -> Sampling:
    """What fills the sampling parameters a request leaves out: K3's recipe for the thinking
    mode; own-sampling-defaults: the server's own defaults."""
    if "own-sampling-defaults" in faults:
        return _SERVER_OWN_SAMPLING
    return K3_THINKING_SAMPLING if thinking else K3_INSTANT_SAMPLING


def grammar_arguments(faults: frozenset[str], strict: bool, arguments: Mapping[str, Any]) -> Mapping[str, Any]:
    """The arguments a call can carry under the deployment's tool-call grammar (strict tools only).

    ascii-only-property-grammar: the grammar has no path to a property name that is not ASCII
    (SGLang PR 39895: xgrammar clamps property-name literals to ASCII; llama.cpp issue 28429), so
    such an argument is never written."""
    if not strict or "ascii-only-property-grammar" not in faults:
        return arguments
    return {key: value for key, value in arguments.items() if key.isascii()}


def usage_counts_tools(faults: frozenset[str]) -> bool:
    """prompt-tokens-exclude-tools: usage.prompt_tokens leaves out the rendered tool declarations."""
    return "prompt-tokens-exclude-tools" not in faults


# --- how a valid request is understood -----------------------------------------------

# tool_choice modes that a faulty deployment handles as "auto".
_TOOL_CHOICE_IGNORED_BY: Mapping[str, str] = {
    "tool-choice-none-ignored": "none",
    "tool-choice-required-ignored": "required",
    "tool-choice-named-ignored": "named",
}


def on_request(faults: frozenset[str], request: ChatRequest) -> ChatRequest:
    if not faults:
        return request
    changes: dict[str, Any] = {}
    if "effort-ignored" in faults:
        changes["effort"] = "max"  # the chat template's default when no effort reaches it
    if "response-format-ignored" in faults:
        changes["response_format"] = None
    tool_choice = _tool_choice_as_understood(faults, request)
    if tool_choice != (request.tool_choice, request.named_tool):
        changes["tool_choice"], changes["named_tool"] = tool_choice
    return dataclasses.replace(request, **changes) if changes else request


def _tool_choice_as_understood(faults: frozenset[str], request: ChatRequest) -> tuple[str, str | None]:
    mode = request.tool_choice
    if any(fault in faults and mode == ignored for fault, ignored in _TOOL_CHOICE_IGNORED_BY.items()):
        return "auto", None
    if "eager-tool-calls" in faults and mode == "auto" and request.tools:
        return "required", None  # "required" calls the best-matching tool, else the first
    return mode, request.named_tool


def first_tool_call_index(faults: frozenset[str], calls_in_history: int) -> int:
    """K3 numbers tool-call ids across the whole conversation; reused-tool-ids restarts every turn."""
    return 0 if "reused-tool-ids" in faults else calls_in_history


# --- raw tool-call markup --------------------------------------------------------------


def tool_markup_without_tools(faults: frozenset[str], request: ChatRequest, item: FixtureItem | None) -> str | None:
    """Content replacing a text answer when the model calls tools that the request never declared.

    SGLang 39583: with no `tools` the tool-call parser never runs, so calls the model makes
    anyway (here: the fixture's expected calls) reach the client as raw markup.
    """
    if "xtml-tools-without-tools" not in faults or request.tools or item is None or not item.tool_calls:
        return None
    if request.messages[-1].get("role") == "tool":
        return None  # with a tool result in hand the model answers rather than calling again
    return xtml_tools_block(
        # Numbered within the message from 1, as K3's encoder writes them (raw_output.py).
        (call.name, index, call.arguments)
        for index, call in enumerate(item.tool_calls, start=1)
    )


# --- state across requests -------------------------------------------------------------

PREFIX_WORDS = 1_000
# Bounded so a long benchmark cannot grow the server without limit; old prefixes are evicted first.
_REMEMBERED_PREFIXES = 65_536


class PrefixCache:
    """The prompt prefixes a deployment has prefilled, for prefix-cache-corruption.

    K3 keeps a fixed-size recurrent state for 69 of its 93 layers; SGLang snapshots it at
    prompt positions for prefix caching, and bugs there corrupt answers only when a cached
    prefix is reused. The first request with a prefix is answered normally.
    """

    def __init__(self) -> None:
        self._seen: OrderedDict[bytes, None] = OrderedDict()

    def reuses_prefix(self, prompt: str) -> bool:
        """Whether the first PREFIX_WORDS words of `prompt` were seen before; remembers them either way."""
        words = prompt.split(maxsplit=PREFIX_WORDS)
        if len(words) < PREFIX_WORDS:
            return False  # too short to have been cached
        key = hashlib.sha256(" ".join(words[:PREFIX_WORDS]).encode()).digest()
        if key in self._seen:
            self._seen.move_to_end(key)
            return True
        self._seen[key] = None
        if len(self._seen) > _REMEMBERED_PREFIXES:
            self._seen.popitem(last=False)
        return False


def prefix_cache_for(faults: frozenset[str]) -> PrefixCache | None:
    """The cache an app keeps for its profile: only a prefix-cache-corruption deployment keeps any state."""
    return PrefixCache() if "prefix-cache-corruption" in faults else None


# --- model-level output (both modes) ----------------------------------------------------


def on_completion(faults: frozenset[str], completion: SimulatedTurn) -> SimulatedTurn:
    if not faults:
        return completion
    for fault, edit in _COMPLETION_EDITS:
        if fault in faults:
            completion = edit(completion)
    return completion


def _raw_stop_token(completion: SimulatedTurn) -> SimulatedTurn:
    if completion.finish_reason != "stop":
        return completion
    return dataclasses.replace(completion, finish_reason=_RAW_STOP)


def _prompt_tokens_skewed(completion: SimulatedTurn) -> SimulatedTurn:
    # ROCm ATOM 1727: usage counts a constant few tokens the rendered prompt does not hold.
    return dataclasses.replace(completion, prompt_tokens=completion.prompt_tokens + _PROMPT_TOKEN_SKEW)


def _usage_without_reasoning(completion: SimulatedTurn) -> SimulatedTurn:
    return dataclasses.replace(completion, completion_tokens=completion.completion_tokens - completion.reasoning_tokens)


def _usage_of_content_only(completion: SimulatedTurn) -> SimulatedTurn:
    # Tokens counted from the end of the thinking block on: the reasoning costs nothing.
    return dataclasses.replace(
        completion, completion_tokens=max(1, count_tokens(completion.content or "")), reasoning_tokens=0
    )


def _token_after_eos(completion: SimulatedTurn) -> SimulatedTurn:
    # Draft tokens accepted past the end-of-message token are kept: one stray token follows the answer.
    if not completion.content:
        return completion
    stray = hashlib.sha256(completion.content.encode()).digest()[0] % 10
    return dataclasses.replace(
        completion, content=f"{completion.content} {stray}", completion_tokens=completion.completion_tokens + 1
    )


def _one_id_for_all_calls(completion: SimulatedTurn) -> SimulatedTurn:
    # An id built from the turn rather than the call: parallel calls share it.
    if not completion.tool_calls:
        return completion
    shared = completion.tool_calls[0].id
    return dataclasses.replace(
        completion, tool_calls=tuple(dataclasses.replace(call, id=shared) for call in completion.tool_calls)
    )


_COMPLETION_EDITS: tuple[tuple[str, Callable[[SimulatedTurn], SimulatedTurn]], ...] = (
    ("raw-stop-token", _raw_stop_token),
    ("prompt-tokens-skewed", _prompt_tokens_skewed),
    ("usage-excludes-reasoning", _usage_without_reasoning),
    ("usage-ignores-reasoning", _usage_of_content_only),
    ("tokens-after-eos", _token_after_eos),
    ("duplicate-tool-ids", _one_id_for_all_calls),
)


# --- the raw output and the parsers that read it ---------------------------------------


def on_raw(faults: frozenset[str], raw: str) -> str:
    """K3's raw output as a faulty model (or chat template) writes it."""
    if not faults:
        return raw
    if "k2-think-tags" in faults and THINK_OPEN in raw:
        # K2's template habits inside K3's think block: the reasoning itself is wrapped in <think> tags.
        raw = raw.replace(THINK_OPEN, f"{THINK_OPEN}<think>", 1).replace(THINK_CLOSE, f"</think>{THINK_CLOSE}", 1)
    if "empty-content" in faults and RESPONSE_OPEN in raw:
        # The model never closes its think block: the answer is written inside it, so the
        # reasoning parser reads it as reasoning and the content is empty.
        raw = raw.replace(f"{THINK_CLOSE}{RESPONSE_OPEN}", "\n", 1).replace(RESPONSE_OPEN, "", 1)
        raw = raw.replace(RESPONSE_CLOSE, "", 1)
    if "skipped-think-as-reasoning" in faults and _skips_think(raw):
        # The prompt's generation prefix opened the think block; the model writes the reply
        # at once and closes the response it never opened (SGLang PR 37743's shape).
        answer = raw.partition(RESPONSE_OPEN)[2].partition(RESPONSE_CLOSE)[0]
        raw = f"{answer}{RESPONSE_CLOSE}{MESSAGE_CLOSE}"
    if faults & _OMITTED_THINK_CLOSE and TOOLS_OPEN in raw and THINK_CLOSE in raw:
        # vLLM 53246: no think close; the answer runs on from the reasoning and its response
        # is closed without having been opened; the tools block follows as usual.
        raw = raw.replace(THINK_CLOSE, "\n", 1).replace(RESPONSE_OPEN, "", 1)
    if "think-opener-as-text" in faults and _plain_whole_answer(raw):
        # SGLang PR 32677's second shape: the opener written as text, then only the markers.
        raw = f"{_THINK_OPENER_AS_TEXT}{THINK_CLOSE}{RESPONSE_OPEN}{RESPONSE_CLOSE}{MESSAGE_CLOSE}"
    if "thinking-off-answer-as-reasoning" in faults and raw.startswith(RESPONSE_OPEN):
        # Thinking off: the generation prompt opened the response block, so the model's
        # output starts with the answer itself (ik_llama.cpp 1685, vllm-ascend 9361).
        raw = raw.removeprefix(RESPONSE_OPEN)
    if "hallucinated-tool-name" in faults:
        # The model writes the `functions.` namespace of K2's call ids into the tool attribute.
        raw = raw.replace('<|open|>call tool="', '<|open|>call tool="functions.')
    return raw


_OMITTED_THINK_CLOSE = frozenset({"tools-lost-in-unclosed-think", "tools-lost-in-unclosed-think-streams"})


def _plain_whole_answer(raw: str) -> bool:
    """An answer, not a call, and not cut by max_tokens."""
    return RESPONSE_OPEN in raw and TOOLS_OPEN not in raw and MESSAGE_CLOSE in raw


def _skips_think(raw: str) -> bool:
    if not _plain_whole_answer(raw):
        return False  # only whole answers: not calls, not outputs cut by max_tokens
    share, out_of = _SKIPPED_THINK_SHARE
    return zlib.crc32(raw.encode()) % out_of < share


def parser_settings(faults: frozenset[str]) -> ParserSettings:
    """How this deployment's parsers are configured (or which parser bug it has)."""
    if not faults & _PARSER_FAULTS:
        return _HEALTHY_PARSERS
    return ParserSettings(
        reasoning="no-reasoning-parser" not in faults,
        recognises_calls="empty-tool-calls" not in faults,
        typed_arguments="stringified-arguments" not in faults,
        complete_arguments="unparsed-arguments" not in faults,
        strips_message_close_in_streams="message-close-leak" not in faults,
        strings_kept_as_written="numeric-strings-coerced" not in faults,
        values_end_at_closing_marker="arguments-cut-at-marker" not in faults,
        undecided_until_first_marker=not faults & _FORCED_INTO_THINK,
        later_channels_end_think="tools-lost-in-unclosed-think" not in faults,
        later_channels_end_think_in_streams=not faults & _OMITTED_THINK_CLOSE,
        forced_reasoning="think-opener-as-text" not in faults,
        calls_before_tools_close="unclosed-tools-section-dropped" not in faults,
    )


# A reasoning detector forced into the think block reads marker-free output as reasoning.
_FORCED_INTO_THINK = frozenset({"skipped-think-as-reasoning", "thinking-off-answer-as-reasoning"})
_HEALTHY_PARSERS = ParserSettings()
_PARSER_FAULTS = frozenset(
    {
        "thinking-off-answer-as-reasoning",
        "unclosed-tools-section-dropped",
        "no-reasoning-parser",
        "empty-tool-calls",
        "stringified-arguments",
        "unparsed-arguments",
        "message-close-leak",
        "numeric-strings-coerced",
        "arguments-cut-at-marker",
        "skipped-think-as-reasoning",
        "tools-lost-in-unclosed-think",
        "tools-lost-in-unclosed-think-streams",
        "think-opener-as-text",
    }
)


def turn_parser_settings(faults: frozenset[str], after_tool_result: bool) -> ParserSettings | None:
    """Settings the server uses for one turn instead of its own; None: its own.

    Dynamo 10533: the reasoning parser is off for a request whose last message is a tool result."""
    if "reasoning-parser-off-after-tool-result" in faults and after_tool_result:
        return dataclasses.replace(parser_settings(faults), reasoning=False)
    return None


def reported_finish(faults: frozenset[str], finish_reason: str) -> str:
    """The finish_reason the server reports for a turn the model ended with `finish_reason`.

    length-reported-as-stop: a turn cut by max_tokens is reported as `stop`; the output itself
    is cut as it was (a call cut in its arguments stays unreturned)."""
    if finish_reason == "length" and "length-reported-as-stop" in faults:
        return "stop"
    return finish_reason


def on_usage(faults: frozenset[str], usage: dict[str, Any]) -> dict[str, Any]:
    """The usage object as the server reports it (both modes)."""
    if "reasoning-tokens-zero" not in faults:
        return usage
    # vLLM 44398 / SGLang 15562: the breakdown says 0 while completion_tokens counts the reasoning.
    return {**usage, "completion_tokens_details": {**usage.get("completion_tokens_details", {}), "reasoning_tokens": 0}}


# --- the non-streaming message -----------------------------------------------------------


def on_message(faults: frozenset[str], message: dict[str, Any]) -> dict[str, Any]:
    if not faults:
        return message
    if "no-reasoning-parser" in faults:
        # A server started without a reasoning parser never writes the field at all.
        message = {key: value for key, value in message.items() if key != _REASONING_CONTENT}
    if "reasoning-field-vllm" in faults:
        message = _renamed(message, _REASONING_CONTENT, _VLLM_REASONING)
    return message


def _renamed(fields: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    return {(new if key == old else key): value for key, value in fields.items()}


# --- SSE frames ----------------------------------------------------------------------------

Chunk = dict[str, Any]
_DONE = "data: [DONE]\n\n"


def on_stream(faults: frozenset[str], frames: Iterator[str]) -> Iterator[str]:
    if not faults or not any(fault in faults for fault, _ in _STREAM_EDITS):
        return frames
    return _edited_frames(faults, frames)


def _without_done(chunks: list[Chunk]) -> list[Chunk]:
    return chunks  # every frame stays; _edited_frames leaves out the closing [DONE]


def _edited_frames(faults: frozenset[str], frames: Iterator[str]) -> Iterator[str]:
    chunks = [json.loads(frame.removeprefix("data: ")) for frame in frames if frame != _DONE]
    for fault, edit in _STREAM_EDITS:
        if fault in faults:
            chunks = edit(chunks)
    for chunk in chunks:
        yield f"data: {json.dumps(chunk)}\n\n"
    if "no-done-marker" not in faults:
        yield _DONE


def _delta(chunk: Chunk) -> dict[str, Any] | None:
    """The chunk's delta; None for the usage frame, which has no choices."""
    choices = chunk["choices"]
    return choices[0]["delta"] if choices else None


def _delta_has(chunk: Chunk, key: str) -> bool:
    delta = _delta(chunk)
    return delta is not None and key in delta


def _is_finish(chunk: Chunk) -> bool:
    return bool(chunk["choices"]) and chunk["choices"][0]["finish_reason"] is not None


def _finish_position(chunks: list[Chunk]) -> int:
    return next(position for position, chunk in enumerate(chunks) if _is_finish(chunk))


def _chunk_like(chunk: Chunk, delta: dict[str, Any], finish_reason: str | None = None) -> Chunk:
    envelope = {key: value for key, value in chunk.items() if key not in ("choices", "usage")}
    return {**envelope, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]}


def _vllm_reasoning_field(chunks: list[Chunk]) -> list[Chunk]:
    for chunk in chunks:
        if _delta_has(chunk, _REASONING_CONTENT):
            chunk["choices"][0]["delta"] = _renamed(chunk["choices"][0]["delta"], _REASONING_CONTENT, _VLLM_REASONING)
    return chunks


def _null_reasoning(chunks: list[Chunk]) -> list[Chunk]:
    # SGLang 39898: the reasoning text is lost and every delta says so with a null field.
    kept = [chunk for chunk in chunks if not _delta_has(chunk, _REASONING_CONTENT)]
    for chunk in kept:
        delta = _delta(chunk)
        if delta is not None:
            delta[_REASONING_CONTENT] = None
    return kept


def _second_finish(chunks: list[Chunk]) -> list[Chunk]:
    after = _finish_position(chunks) + 1
    return [*chunks[:after], _chunk_like(chunks[after - 1], {}, "stop"), *chunks[after:]]


def _zero_reasoning_tokens(chunks: list[Chunk]) -> list[Chunk]:
    for chunk in chunks:
        if "usage" in chunk and isinstance(chunk["usage"], dict):
            chunk["usage"] = on_usage(frozenset({"reasoning-tokens-zero"}), chunk["usage"])
    return chunks


def _without_usage(chunks: list[Chunk]) -> list[Chunk]:
    return [chunk for chunk in chunks if chunk["choices"]]


def _content_first(chunks: list[Chunk]) -> list[Chunk]:
    def is_text(chunk: Chunk) -> bool:
        return _delta_has(chunk, "content") or _delta_has(chunk, _REASONING_CONTENT)

    # sorted() is stable: content keeps its order, then reasoning keeps its order, in the same slots.
    texts = iter(sorted((chunk for chunk in chunks if is_text(chunk)), key=lambda c: not _delta_has(c, "content")))
    return [next(texts) if is_text(chunk) else chunk for chunk in chunks]


def _colliding_indexes(chunks: list[Chunk]) -> list[Chunk]:
    for chunk in chunks:
        if _delta_has(chunk, "tool_calls"):
            for call in chunk["choices"][0]["delta"]["tool_calls"]:
                call["index"] = 0
    return chunks


def _tool_name_in_every_delta(chunks: list[Chunk]) -> list[Chunk]:
    edited: list[Chunk] = []
    for chunk in chunks:
        if not _delta_has(chunk, "tool_calls"):
            edited.append(chunk)
            continue
        for call in chunk["choices"][0]["delta"]["tool_calls"]:
            arguments = call["function"]["arguments"]
            for piece in _pieces(arguments, _ARGUMENT_PIECES):
                repeated = {**call, "function": {"name": call["function"]["name"], "arguments": piece}}
                edited.append(_chunk_like(chunk, {"tool_calls": [repeated]}))
    return edited


def _pieces(text: str, count: int) -> list[str]:
    """`count` consecutive slices of `text` (some empty when it is short) that join back to it."""
    return [text[len(text) * part // count : len(text) * (part + 1) // count] for part in range(count)]


_STREAM_EDITS: tuple[tuple[str, Callable[[list[Chunk]], list[Chunk]]], ...] = (
    ("reasoning-field-vllm", _vllm_reasoning_field),
    ("null-reasoning-stream", _null_reasoning),
    ("double-finish", _second_finish),
    ("no-stream-usage", _without_usage),
    ("content-before-reasoning", _content_first),
    ("parallel-index-collision", _colliding_indexes),
    ("stream-repeats-tool-name", _tool_name_in_every_delta),
    ("no-done-marker", _without_done),
    ("reasoning-tokens-zero", _zero_reasoning_tokens),
)


# --- streams in flight (app.py counts them) ------------------------------------------------


def load_sensitive(faults: frozenset[str]) -> bool:
    """Whether this deployment's streams depend on how many streams are in flight."""
    return bool(faults & _LOAD_FAULTS)


_LOAD_FAULTS = frozenset({"concurrent-empty-tool-deltas", "concurrent-empty-content"})


def under_load(faults: frozenset[str], streams_in_flight: int, frames: Iterator[str]) -> Iterator[str]:
    """A stream's frames as a deployment serving `streams_in_flight` streams at once sends them.

    vLLM 54701: from LOAD_FAULT_STREAMS streams on, every tool_calls delta of a stream is an
    empty array and the stream still ends with finish_reason tool_calls. SGLang 23341: every
    content delta is empty and the stream still ends with finish_reason stop."""
    if not faults & _LOAD_FAULTS or streams_in_flight < LOAD_FAULT_STREAMS:
        return frames
    if "concurrent-empty-content" in faults:
        frames = _emptied_deltas(frames, "content", "")
    if "concurrent-empty-tool-deltas" in faults:
        frames = _emptied_deltas(frames, "tool_calls", [])
    return frames


def _emptied_deltas(frames: Iterator[str], key: str, empty: Any) -> Iterator[str]:
    for frame in frames:
        if frame == _DONE:
            yield frame
            continue
        chunk = json.loads(frame.removeprefix("data: "))
        if _delta_has(chunk, key):
            chunk["choices"][0]["delta"] = {key: empty}
        yield f"data: {json.dumps(chunk)}\n\n"


# --- strict schemas in flight: TensorRT-LLM PR 17845 (app.py counts them) ------------------
# Under sustained concurrent guided load with strict tool schemas, sampling tripped a CUDA
# device-side assert on one rank and killed the whole 16-rank deployment; the same requests
# without the grammar ran clean. Here the process "dies" when more than this many requests
# carrying strict schemas are in flight at once: more than one process of the suites can put in
# flight at the default --k3-concurrency (16; and the other suites send only a few strict
# requests: structured_output's json_schema ones, one tool_calls item's strict tool), fewer
# than the load lane's strict phase does at the default --k3-load-concurrency (32).
GUIDED_CRASH_IN_FLIGHT = 16
# How long a strict request of that deployment waits before decoding: its grammar's compilation,
# in which the requests sent together are all in flight (a healthy profile never waits).
GRAMMAR_COMPILE_S = 0.1


def crashes_under_guided_load(faults: frozenset[str]) -> bool:
    """Whether this deployment dies with too many strict-schema requests in flight at once."""
    return "strict-schemas-crash-under-load" in faults


def carries_strict_schema(body: Mapping[str, Any]) -> bool:
    """Whether a chat request asks for guided decoding by a strict schema: a tool declared
    `strict: true` (in `tools` or a message's dynamic tools) or a strict `json_schema` response format."""
    messages = body.get("messages")
    groups = [body.get("tools")]
    if isinstance(messages, list):
        groups += [message.get("tools") for message in messages if isinstance(message, dict)]
    tools = [tool for group in groups if isinstance(group, list) for tool in group if isinstance(tool, dict)]
    if any(isinstance(tool.get("function"), dict) and tool["function"].get("strict") is True for tool in tools):
        return True
    response_format = body.get("response_format")
    schema = response_format.get("json_schema") if isinstance(response_format, dict) else None
    return isinstance(schema, dict) and schema.get("strict") is True


# --- fused-moe-loop: sglang issue 40751 --------------------------------------------------
# EP32 with the fused MegaMoE kernel: 57 of 113 agentic coding outputs fell into mechanical
# repetition until the token limit (0 of 113 on TP8), every output over 50K tokens looped,
# loops were also seen near 34K input tokens, and accuracy went from 68.1% to 42.5% while
# a math check looked fine. So the loops follow length, not the task: the risk rises
# linearly from nothing at the first bound to certainty at the second, for the output (as
# planned by the healthy model) and for the context, and the larger risk applies.
# The simulator's outputs are far shorter than K3's (600 words of reasoning at effort max
# where K3 thinks for thousands of tokens), so the output bounds are on the simulator's
# scale, a choice: above every authored math answer and HumanEval-sized function it writes
# (at most about 730 tokens) and below the agent turns that write a whole module (2,000 and
# more with the drafts in their thinking); every simulated output over 2,000 tokens loops,
# standing for K3's 50K. The MATH pool's longest worked solutions (up to about 1,100 tokens
# with the reasoning) are over the onset and loop now and then: the length decides.
# Prompts are built at their real length, so the context bounds are K3's own.
LOOP_OUTPUT_TOKENS = (800, 2_000)
LOOP_CONTEXT_TOKENS = (24_000, 40_000)
_LOOP_OPENERS = ("Wait,", "Hmm,", "Actually,", "Let me re-check:")


def loop_risk(output_tokens: int, context_tokens: int) -> float:
    """The chance that a fused-MoE output of this length, on this context, loops."""

    def ramp(value: int, bounds: tuple[int, int]) -> float:
        low, high = bounds
        return min(1.0, max(0.0, (value - low) / (high - low)))

    return max(ramp(output_tokens, LOOP_OUTPUT_TOKENS), ramp(context_tokens, LOOP_CONTEXT_TOKENS))


def falls_into_loop(faults: frozenset[str], output_tokens: int, context_tokens: int, draw: float) -> bool:
    """Whether this output loops; `draw` is uniform on [0, 1) and fixed per request."""
    return "fused-moe-loop" in faults and draw < loop_risk(output_tokens, context_tokens)


def looping_reasoning(rng: random.Random, healthy: str, limit: int) -> str:
    """A healthy start (the first third of the reasoning) and then one sentence repeated
    back to back until the output holds `limit` tokens."""
    words = healthy.split()
    start = " ".join(words[: max(1, len(words) // 3)])
    block = f"{rng.choice(_LOOP_OPENERS)} the loop bound {rng.choice(('must', 'should', 'has to'))} cover index {rng.randrange(2, 9)} before returning. "
    copies = max(1, (limit - count_tokens(start)) // count_tokens(block) + 1)
    return f"{start} {block * copies}"


# --- dcp-context-drift: vLLM issue 41623 ------------------------------------------------
# Decode context parallelism (and the MegaMoE reports on other hardware): the KV cache split
# across ranks is read back wrongly once the context is long, and decoding drifts from text
# into gibberish tokens, not into a clean loop. The damage follows the position in the
# context, the prompt plus what was generated so far, never the task: each request draws
# where its decoding goes wrong, uniformly between the two bounds, and every token generated
# past that position is gibberish. So nothing is garbled below the first bound, a share of
# the outputs that grows with context between them, and everything past the second. The
# bounds are a choice on the simulator's scale (one token per word; its 8K, 32K and 128K
# long-context prompts hold about 6,100, 24,600 and 98,400): above every conformance prompt
# and every agent turn with its output (at most about 8,500), below the 32K prompts.
DRIFT_CONTEXT_TOKENS = (10_000, 65_536)
# Pieces of subwords and scripts that a drifting decoder strings together. Every piece
# holds a letter that is not a hex digit (the recall answers are six hex digits); none a
# digit or an ASCII capital, and no two or three of them make a word of three
# consonant-vowel syllables (the long-context answers: numbers, `VAR` names, generated
# words; tests/unit/reference/test_long_tasks_simulated.py); and none `<` or `|`, so
# gibberish is never mistaken for an answer or for K3's markup.
_GIBBERISH_PIECES = (
    "ization", "ongo", "ström", "мож", "的", "ży", "quux", "tru", "ņa", "ξι", "ilk", "ørn", "ząt", "ного",
    "ht", "wyn", "yk", "ʻo", "ру", "vx", "ünst", "pr", "ос", "zh", "ily", "々", "ког", "ow", "))", "];",
    "_{", "ing", "ment", "Δ", "kw", "ył", "oj", "ums", "ти", "gn",
)  # fmt: skip


def drift_onset(faults: frozenset[str], draw: float) -> int | None:
    """The context position from which this request decodes gibberish; `draw` is uniform on
    [0, 1) and fixed per request. None on a deployment without the fault."""
    if "dcp-context-drift" not in faults:
        return None
    low, high = DRIFT_CONTEXT_TOKENS
    return low + int(draw * (high - low))


def gibberish(rng: random.Random, tokens: int) -> str:
    """`tokens` words of two or three random pieces each: garbled, and not a loop."""
    return " ".join("".join(rng.choice(_GIBBERISH_PIECES) for _ in range(rng.randint(2, 3))) for _ in range(tokens))


def drifted(completion: SimulatedTurn, onset: int, rng: random.Random) -> SimulatedTurn:
    """The completion with every token past context position `onset` turned to gibberish.

    The output keeps its length: the decoder still samples the end of message where the
    healthy one did. Reasoning comes first, then the answer; a garbled answer carries no
    tool call (its markup is garbled with it), so the turn ends with `stop`."""
    kept = max(0, onset - completion.prompt_tokens)
    if kept >= completion.completion_tokens:
        return completion
    reasoning, content = completion.reasoning, completion.content or ""
    reasoning_tokens = completion.reasoning_tokens
    answer_tokens = completion.completion_tokens - reasoning_tokens
    if kept < reasoning_tokens:
        reasoning = _garbled_from(rng, reasoning, kept, reasoning_tokens)
        content = gibberish(rng, answer_tokens)
    elif completion.tool_calls:
        content = gibberish(rng, answer_tokens)  # the call's markup is among the first tokens garbled
    else:
        content = _garbled_from(rng, content, kept - reasoning_tokens, answer_tokens)
    finish_reason = "stop" if completion.finish_reason == "tool_calls" else completion.finish_reason
    return dataclasses.replace(
        completion, reasoning=reasoning, content=content, tool_calls=(), finish_reason=finish_reason
    )


def _garbled_from(rng: random.Random, text: str, kept: int, tokens: int) -> str:
    healthy = take_tokens(text, kept)
    garbled = gibberish(rng, tokens - kept)
    return f"{healthy} {garbled}" if healthy else garbled
