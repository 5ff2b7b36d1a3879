"""The fault catalogue: every deliberate fault of the reference deployment, declared once.

Each row names a fault, its kind and the real serving bug it reproduces. `faults.py`
(where faults act) and `profiles.py` (one profile per conformance and transport fault)
both derive from this table, so adding a fault is adding a row here and its effect there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# conformance: an API or parser fault the conformance suites must catch. accuracy: a
# layout that answers worse or loops, which only the gate's comparison with a baseline can
# catch. transport: a network or server that fails requests, which retries and resume must absorb.
FaultKind = Literal["conformance", "accuracy", "transport"]


@dataclass(frozen=True)
class Fault:
    name: str
    kind: FaultKind
    # The real bug this fault reproduces, with its source (issue, PR) where there is one.
    bug: str


FAULTS: tuple[Fault, ...] = (
    # reasoning and the API
    Fault(
        "no-reasoning-parser",
        "conformance",
        (
            "server started without --reasoning-parser kimi_k3: no reasoning field, the thinking block "
            "arrives inside content between <|open|>think<|sep|> and <|close|>think<|sep|>"
        ),
    ),
    Fault(
        "reasoning-field-vllm",
        "conformance",
        (
            "newer vLLM field name: reasoning travels in `reasoning` instead of `reasoning_content` "
            "(not a bug by itself; strict mode flags it)"
        ),
    ),
    Fault(
        "message-close-leak",
        "conformance",
        ("vLLM issues 51399/51412: the <|close|>message<|sep|> end marker leaks as a last content delta in streams"),
    ),
    Fault(
        "k2-think-tags",
        "conformance",
        "Kimi K2 chat template markers leaking into K3 output: reasoning wrapped in <think>...</think>",
    ),
    Fault(
        "raw-stop-token",
        "conformance",
        "ROCm/ATOM issue 1727: finish_reason is the raw stop token `stop_163586` instead of `stop`",
    ),
    Fault(
        "empty-content",
        "conformance",
        "the reasoning parser swallows the answer: content is empty and the answer ends the reasoning",
    ),
    Fault(
        "length-reported-as-stop",
        "conformance",
        "truncation by max_tokens reported as finish_reason `stop` instead of `length`",
    ),
    Fault(
        "effort-ignored",
        "conformance",
        "thinking effort not passed to the chat template: every request reasons at `max` length",
    ),
    Fault(
        "null-reasoning-stream",
        "conformance",
        (
            'SGLang issue 39898: every streamed delta carries "reasoning_content": null and the reasoning '
            "text is never streamed"
        ),
    ),
    Fault(
        "double-finish",
        "conformance",
        "streams send a second finish frame (finish_reason `stop`, empty delta) after the real one",
    ),
    Fault("no-stream-usage", "conformance", "stream_options.include_usage ignored: streams end without a usage frame"),
    Fault("content-before-reasoning", "conformance", "streams send every content delta before the reasoning deltas"),
    Fault(
        "usage-excludes-reasoning",
        "conformance",
        ("usage.completion_tokens leaves out reasoning tokens (completion_tokens_details.reasoning_tokens still set)"),
    ),
    Fault(
        "rejects-reasoning-history",
        "conformance",
        (
            "servers that reject preserved thinking: HTTP 400 when an assistant message in the history "
            "carries `reasoning_content` or `reasoning`"
        ),
    ),
    # tool calls
    Fault(
        "usage-ignores-reasoning",
        "conformance",
        (
            "usage counts only the tokens after the thinking block: hundreds of words of reasoning, "
            "completion_tokens of a few and reasoning_tokens 0"
        ),
    ),
    Fault(
        "drops-reasoning-history",
        "conformance",
        (
            'the chat template renders earlier turns without their reasoning (preserve_thinking / thinking.keep "all" '
            "not passed to it, as K2's template did): the reasoning is accepted but neither reaches the model, "
            "so a later turn cannot use it, nor counts in prompt_tokens"
        ),
    ),
    Fault(
        "tokens-after-eos",
        "conformance",
        (
            "speculative decoding keeps draft tokens accepted past the end-of-message token: "
            'a stray token follows every answer ("42 7")'
        ),
    ),
    Fault(
        "no-done-marker",
        "conformance",
        "streams end after their finish and usage frames without the closing data: [DONE] of the OpenAI protocol",
    ),
    Fault(
        "unparsed-arguments",
        "conformance",
        (
            "the tool-call parser closes the argument block one character early: arguments arrive as "
            'JSON without its closing brace ({"city": "Paris")'
        ),
    ),
    Fault(
        "empty-tool-calls",
        "conformance",
        (
            "MoonshotAI Kimi-K2 issue 26: the tool-call parser misses the calls: `tool_calls: []`, "
            "finish_reason `tool_calls`, and the raw XTML call markup in content"
        ),
    ),
    Fault(
        "stringified-arguments",
        "conformance",
        (
            "K3 XTML tool parser treating every argument as a string: numbers, booleans, arrays and "
            'objects arrive JSON-encoded as strings ({"days": "3"})'
        ),
    ),
    Fault(
        "hallucinated-tool-name",
        "conformance",
        (
            "vLLM PR 36891: the tool name keeps the `functions.` prefix (functions.get_weather), naming an undeclared tool"
        ),
    ),
    Fault(
        "reused-tool-ids",
        "conformance",
        "tool-call ids restart at functions.NAME:0 every turn, so ids repeat within a conversation",
    ),
    Fault(
        "duplicate-tool-ids",
        "conformance",
        (
            "tool-call id disputes (functions.NAME:IDX vs NAME_IDX vs call_<uuid>) gone wrong: parallel calls "
            "in one message share one id"
        ),
    ),
    Fault("tool-choice-none-ignored", "conformance", 'vLLM PR 43155: tool_choice "none" treated as "auto"'),
    Fault(
        "tool-choice-required-ignored", "conformance", 'SGLang issue 39895: tool_choice "required" treated as "auto"'
    ),
    Fault(
        "tool-choice-named-ignored",
        "conformance",
        ('a named tool_choice treated as "auto", and a named tool missing from `tools` is not rejected'),
    ),
    Fault(
        "required-without-tools-accepted",
        "conformance",
        ("tool_choice required or named without `tools` answered 200 with text instead of rejected with 400"),
    ),
    Fault(
        "parallel-index-collision",
        "conformance",
        "every streamed tool-call delta has index 0, so clients merge parallel calls into one",
    ),
    Fault(
        "eager-tool-calls",
        "conformance",
        'with tools declared and tool_choice "auto" a tool is always called, even for chit-chat',
    ),
    Fault(
        "stream-repeats-tool-name",
        "conformance",
        ("streamed tool calls repeat id, type and function.name in every argument delta, so clients concatenate names"),
    ),
    Fault(
        "xtml-tools-without-tools",
        "conformance",
        (
            "SGLang issue 39583: with no tools declared the tool-call parser never runs, so tool calls "
            "leak into content as raw XTML markup"
        ),
    ),
    Fault("response-format-ignored", "conformance", "response_format ignored: plain text where JSON was requested"),
    Fault(
        "lenient-validation",
        "conformance",
        (
            "invalid requests (duplicate or invalid tool names, tool message without tool_call_id, "
            "invalid tool_choice) answered 200 instead of rejected with 400"
        ),
    ),
    Fault(
        "validation-500",
        "conformance",
        (
            "invalid requests (duplicate or invalid tool names, tool message without tool_call_id, "
            "invalid tool_choice) crash with HTTP 500 instead of a 400"
        ),
    ),
    # the request contract (issue 13)
    Fault(
        "effort-precedence-inverted",
        "conformance",
        "reasoning_effort overrides thinking.effort / chat_template_kwargs.thinking_effort, the opposite of SGLang 0.5.23 (serving_chat.py) and Moonshot's API (KVV test_reasoning_effort_ignored_when_effort_present)",
    ),
    Fault(
        "reasoning-effort-dropped",
        "conformance",
        "top-level reasoning_effort never reaches the chat template (only chat_template_kwargs is forwarded), so requests that set only reasoning_effort reason at max",
    ),
    Fault(
        "thinking-disable-ignored",
        "conformance",
        'thinking type "disabled" (or chat_template_kwargs.thinking false) ignored: the template always thinks',
    ),
    Fault(
        "dynamic-tools-ignored",
        "conformance",
        "tools declared inside system messages (messages[].tools, a K3 API feature) dropped as an unknown field: those tools are never called, tool_choice required with only them is refused",
    ),
    Fault(
        "dynamic-tools-leading-only",
        "conformance",
        "the chat template collects messages[].tools only from the system messages before the first user turn (it renders them in the prompt's preamble): a tool declared by a system message later in the conversation is dropped, and tool_choice required with only it is refused",
    ),
    Fault(
        "json-output-indented",
        "conformance",
        "the structured-output grammar allows any whitespace (xgrammar's any_whitespace), and JSON answers under response_format arrive indented over several lines: valid JSON, not the compact form Moonshot's API returns: a fault only for a vendor build (--k3-vendor)",
    ),
    Fault(
        "dynamic-tools-unvalidated",
        "conformance",
        "malformed tools inside messages (bogus type, missing name, invalid names, tools on a user turn) answered 200 instead of rejected with 400",
    ),
    Fault(
        "response-format-unvalidated",
        "conformance",
        "malformed response_format (no name, no schema, non-boolean strict, unknown type) answered 200 as text instead of rejected with 400",
    ),
    Fault(
        "rejects-tool-choice-without-tools",
        "conformance",
        'tool_choice "auto" or "none" without a tools field rejected with 400',
    ),
    Fault(
        "sampling-params-unlocked",
        "conformance",
        "sampling parameters that Moonshot's API fixes (temperature above 1, top_p, penalties) passed on unchanged, as open-source SGLang/vLLM do: a fault only for a vendor build (--k3-vendor)",
    ),
    Fault(
        "own-sampling-defaults",
        "conformance",
        "sampling parameters a request leaves out filled with the server's own defaults (temperature 1, top_p 1: vLLM --generation-config vllm, SGLang --sampling-defaults openai) instead of K3's (thinking: 1.0 and 0.95; not thinking: 0.6 and 0.95): a fault only for a vendor build (--k3-vendor)",
    ),
    Fault(
        "strict-history-ids",
        "conformance",
        "histories written by other clients refused: tool-call ids other than functions.NAME:IDX and list content in assistant turns get HTTP 400 (K2 on vLLM: the id parser was too strict)",
    ),
    Fault(
        "numeric-strings-coerced",
        "conformance",
        'a naive tool-call parser guesses each string value\'s type from its text instead of the declared type: "00125648" arrives as the number 125648',
    ),
    Fault(
        "arguments-cut-at-marker",
        "conformance",
        "a naive tool-call parser ends an argument value at the first `<|`, taking it for the closing marker: string arguments quoting K3's markers or code containing `<|` arrive truncated",
    ),
    Fault(
        "schema-constraints-dropped",
        "conformance",
        "the tool-call grammar drops JSON-schema constraints (ranges, lengths, patterns, formats, const, minItems): arguments have the right types but break the declared bounds",
    ),
    Fault(
        "prompt-tokens-exclude-tools",
        "conformance",
        "usage.prompt_tokens leaves out the rendered tool declarations, so it disagrees with the server's own /tokenize for requests with tools",
    ),
    # public K3/K2 serving bugs (docs/public-bugs.md; issue 23)
    Fault(
        "skipped-think-as-reasoning",
        "conformance",
        (
            "SGLang PR 33995 (and 34187, 37743): the model sometimes skips its think block and writes the reply "
            "directly, closing a response it never opened (about 18% of answers here: 127 of 700 BEAM answers there); "
            "a reasoning parser forced into the think block by the prompt's generation prefix reads the whole reply "
            "as reasoning, content empty"
        ),
    ),
    Fault(
        "tools-lost-in-unclosed-think",
        "conformance",
        (
            "vLLM issue 53246 / PR 53249: the model omits <|close|>think<|sep|> (runs on into the answer, closes a "
            "response it never opened, then calls); a parser that leaves the think block only at its close returns "
            "the call inside reasoning_content and tool_calls empty (1-10% of tool turns there; every tool turn here)"
        ),
    ),
    Fault(
        "tools-lost-in-unclosed-think-streams",
        "conformance",
        (
            "vLLM issue 53246, after the non-streaming fix: the same omitted think close, recovered in whole "
            "outputs but not in streams (the streaming lane still failed on vLLM 0.28.0)"
        ),
    ),
    Fault(
        "concurrent-empty-tool-deltas",
        "conformance",
        (
            "vLLM issue 54701: with 6 or more streams in flight the streaming tool-call parser emits empty "
            "tool_calls deltas (no name, no arguments) and the stream still ends with finish_reason tool_calls; "
            "never with one stream, never without streaming (only the load lane, at high concurrency, sees it)"
        ),
    ),
    Fault(
        "think-opener-as-text",
        "conformance",
        (
            "SGLang PR 32677, second shape: the reasoning detector is not forced into the think block "
            '(reasoning_default "thinking" looked up chat_template_kwargs.thinking, which K3 requests do not '
            "carry) and enters it only at an exact <|open|>think<|sep|>; the model re-emits that opener from "
            "ordinary text tokens (`<|sep` + `|`) and stops after the markers, so the reply is ~23 tokens of raw "
            "markers and no answer (every plain answer here)"
        ),
    ),
    Fault(
        "prompt-tokens-skewed",
        "conformance",
        (
            "ROCm ATOM issue 1727: usage.prompt_tokens a constant 3 more than the prompt the server rendered "
            "(its own /tokenize count), on every request"
        ),
    ),
    Fault(
        "ascii-only-property-grammar",
        "conformance",
        (
            "SGLang PR 39895 (and llama.cpp issue 28429): the strict tool-call grammar has no path to a "
            "non-ASCII property name (xgrammar clamps property-name literals to ASCII; llama.cpp drops the "
            "parameter's rule), so a call to a strict tool never carries an argument whose name is not ASCII"
        ),
    ),
    Fault(
        "strict-schemas-crash-under-load",
        "conformance",
        (
            "TensorRT-LLM PR 17845: under concurrent guided load with strict tool schemas, sampling tripped a "
            "device-side assert on one rank and killed the whole deployment (the same requests without the "
            "grammar ran clean); simulated here: when more than 16 requests carrying strict schemas are in "
            "flight at once the server process dies, every request in flight loses its connection and every "
            "later request of any kind, /health included, gets HTTP 503 for the rest of the session; one at a "
            "time nothing happens (only the load lane's strict phase puts that many in flight)"
        ),
    ),
    # the 2026 public bugs the API contract matrix catches (issue 34; docs/public-bugs.md)
    Fault(
        "unclosed-tools-section-dropped",
        "conformance",
        (
            "Dynamo PR 8208 (said there to be in Moonshot's reference parser and copied into vLLM and SGLang): "
            "max_tokens reached before the tool-call section closes and the parser discards the whole section, "
            "the calls written whole before the cut included (a parser setting)"
        ),
    ),
    Fault(
        "reasoning-tokens-zero",
        "conformance",
        (
            "vLLM issue 44398 / SGLang issue 15562: usage.completion_tokens_details.reasoning_tokens reported as 0 "
            "while the reasoning is returned and counted in completion_tokens"
        ),
    ),
    Fault(
        "thinking-off-answer-as-reasoning",
        "conformance",
        (
            "ik_llama.cpp issue 1685 / vllm-ascend issue 9361: with thinking off the generation prompt opens the "
            "response, the model writes the answer straight away, and a reasoning parser forced into the think "
            "block whatever the switch says returns it as reasoning_content, content empty"
        ),
    ),
    Fault(
        "reasoning-parser-off-after-tool-result",
        "conformance",
        (
            "Dynamo issue 10533 (PR 8901's suppress_reasoning_after_tool): the reasoning parser is switched off for "
            "a request whose last message is a tool result, so that turn's think block and its markers arrive in content"
        ),
    ),
    Fault(
        "concurrent-empty-content",
        "conformance",
        (
            "SGLang issue 23341: under many concurrent requests (100 workers there) a streamed answer arrives with "
            "empty content and finish_reason stop; here from 6 streams in flight, every content delta is emptied"
        ),
    ),
    # state
    Fault(
        "prefix-cache-corruption",
        "conformance",
        (
            "SGLang prefix caching of K3's recurrent state (69 of 93 layers keep a fixed-size state "
            "snapshotted at prompt positions): answers corrupted when a cached prompt prefix is reused"
        ),
    ),
    # the model on a faulty layout: only a comparison with a baseline can catch it
    Fault(
        "fused-moe-loop",
        "accuracy",
        "sglang issue 40751: EP32 with the fused MegaMoE kernel; about half of the long coding outputs loop "
        "until the token limit after a healthy start (0 of 113 on TP8)",
    ),
    Fault(
        "dcp-context-drift",
        "accuracy",
        "vLLM issue 41623 and the MegaMoE reports on other hardware: with decode context parallelism the output "
        "drifts into gibberish tokens (not a loop) once the context is long; the longer the context, the likelier "
        "and the earlier (nothing below 10K context tokens, everything past 64K)",
    ),
    # the network or the server process: retries and resume must absorb them (transport.py)
    Fault(
        "latency-spikes",
        "transport",
        "every other request stalls 3 s on its first attempt (mid-stream, after the first frame)",
    ),
    Fault(
        "dropped-connection",
        "transport",
        "every other request loses its connection half-way through the answer on its first attempt",
    ),
    Fault(
        "stream-without-done",
        "transport",
        (
            "every other stream ends cleanly right after the finish frame on its first attempt: no usage frame, no [DONE]"
        ),
    ),
    Fault(
        "malformed-frame",
        "transport",
        "every other request gets a frame (or body) of cut-off JSON on its first attempt",
    ),
    Fault(
        "rate-limited",
        "transport",
        ("every other request gets HTTP 429 with Retry-After: 1 on its first attempt, and again if retried too early"),
    ),
    Fault(
        "server-errors",
        "transport",
        "every other request gets a burst of server errors: HTTP 503, then HTTP 500 on its retry",
    ),
    Fault(
        "server-restart",
        "transport",
        (
            "the server restarts at the fourth request: every open connection is cut and the next two attempts are refused"
        ),
    ),
)

FAULT_BY_NAME: dict[str, Fault] = {fault.name: fault for fault in FAULTS}


def faults_of_kind(kind: FaultKind) -> frozenset[str]:
    return frozenset(fault.name for fault in FAULTS if fault.kind == kind)


CONFORMANCE_FAULTS: frozenset[str] = faults_of_kind("conformance")
ACCURACY_FAULTS: frozenset[str] = faults_of_kind("accuracy")
TRANSPORT_FAULTS: frozenset[str] = faults_of_kind("transport")
KNOWN_FAULTS: frozenset[str] = frozenset(FAULT_BY_NAME)
