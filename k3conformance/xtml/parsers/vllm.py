"""vLLM's own kimi_k3 parsers (the `vllm-parsers` extra), driven the way vLLM's chat server drives them.

vLLM 0.33.0 composes `KimiK3ReasoningParser` and `KimiK3ToolParser` into `KimiK3Parser`
(`vllm/parser/parser_manager.py` picks it for `--reasoning-parser kimi_k3 --tool-call-parser
kimi_k3 --enable-auto-tool-choice`). Its server runs `Parser.parse` and
`assemble_chat_message_fields` on a whole output, and one `ChatStreamProcessor.step` per
detokenized chunk when streaming; so does this adapter, with a real `ChatCompletionRequest`,
and hands on vLLM's call ids (`chatcmpl-tool-<hex>`).

The parsers match K3's markers as token-id sequences, so they need a tokenizer: K3's is not
shipped, so one is built in memory (`_k3_tokenizer`): byte-level, with K3's `<|open|>`,
`<|close|>` and `<|sep|>` as special tokens, as in K3's vocabulary. vLLM's detokenizer never
splits a special token across chunks, so a streamed piece that ends inside one is held until
the token is whole; the three-token markers are still split between chunks anywhere.

vLLM imports torch and xgrammar. Nothing runs on a GPU, but torch must import: PyPI's Linux
wheel is a CUDA build that needs its CUDA libraries installed even on a machine without a GPU.
"""

from __future__ import annotations

import importlib
from functools import cache
from typing import Any, NamedTuple

from k3conformance.xtml.parsers.base import Parsed, ParsedCall, ParserSettings, ParserUnavailable, installed_version

INSTALL_HINT = (
    "install vLLM's parsers: pip install 'k3conformance[vllm-parsers]' && pip install --no-deps vllm==0.33.0 "
    "(see docs/parsers.md: torch from PyPI brings its CUDA libraries)"
)
# K3's XTML special tokens (xtml/markup.py's markers are built from these three).
_SPECIAL_TOKENS = ("<|open|>", "<|close|>", "<|sep|>")
# The server's model name and the one tool a request with tools declares: the parsers read neither.
_MODEL = "kimi-k3"
# The request's one message. The reference does not render K3's chat template, so the prompt the
# parsers see is this text alone: no think marker, so the output's own markers decide (vLLM's
# parsers read the prompt only to find whether it left a think block open or closed).
_PROMPT = "?"
_TOOLS = [{"type": "function", "function": {"name": "any_tool", "parameters": {"type": "object"}}}]


class _VLLMClasses(NamedTuple):
    """What vLLM's chat server uses to parse, from the installed vllm."""

    manager: Any  # vllm.parser.ParserManager
    request: Any  # ChatCompletionRequest
    assemble: Any  # assemble_chat_message_fields
    stream_processor: Any  # ChatStreamProcessor


@cache
def _vllm() -> _VLLMClasses:
    chat = "vllm.entrypoints.openai.chat_completion"
    try:
        return _VLLMClasses(
            importlib.import_module("vllm.parser").ParserManager,
            importlib.import_module(f"{chat}.protocol").ChatCompletionRequest,
            importlib.import_module(f"{chat}.message_assembly").assemble_chat_message_fields,
            importlib.import_module(f"{chat}.stream_processor").ChatStreamProcessor,
        )
    except Exception as error:  # an import error, or torch failing to load its libraries
        raise ParserUnavailable(f"vLLM's kimi_k3 parsers did not load ({error!r}); {INSTALL_HINT}") from error


@cache
def _k3_tokenizer() -> Any:
    """A byte-level tokenizer with K3's special tokens: every text encodes, markers as K3's ids would."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    byte_symbols = pre_tokenizers.ByteLevel.alphabet()
    model = models.BPE(vocab={symbol: index for index, symbol in enumerate(sorted(byte_symbols))}, merges=[])
    tokenizer = Tokenizer(model)
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer)  # type: ignore[no-untyped-call]
    fast.add_special_tokens({"additional_special_tokens": list(_SPECIAL_TOKENS)})
    return fast


class VLLMParser:
    """`vllm serve --reasoning-parser kimi_k3 --tool-call-parser kimi_k3 --enable-auto-tool-choice`;
    without the reasoning setting, the same server started without `--reasoning-parser`."""

    name = "vllm"

    def __init__(self, settings: ParserSettings, *, thinking: bool = True) -> None:
        if settings != ParserSettings(reasoning=settings.reasoning):
            raise ParserUnavailable("only the builtin parser reproduces parser bugs; vLLM's has them or not")
        self.settings = settings
        # vLLM's server builds each request's parser with the request's chat_template_kwargs; with
        # thinking off, K3's reasoning parser passes everything through as content.
        self.chat_template_kwargs = {"thinking": thinking}
        self.vllm = _vllm()
        self.tokenizer = _k3_tokenizer()
        self.parser_class = self.vllm.manager.get_parser(
            tool_parser_name="kimi_k3",
            reasoning_parser_name="kimi_k3" if settings.reasoning else None,
            enable_auto_tools=True,
            model_name=_MODEL,
            tokenizer=self.tokenizer,
        )
        self.version = installed_version("vllm")

    def _request(self, tools: bool, *, stream: bool) -> Any:
        # Without tools vLLM's request defaults tool_choice to "none", with tools to "auto".
        return self.vllm.request(
            model=_MODEL,
            messages=[{"role": "user", "content": _PROMPT}],
            tools=_TOOLS if tools else None,
            stream=stream,
        )

    def _prompt_token_ids(self) -> list[int]:
        return list(self.tokenizer.encode(_PROMPT, add_special_tokens=False))

    def for_request(self, *, thinking: bool) -> VLLMParser:
        return self if self.chat_template_kwargs["thinking"] == thinking else _with_thinking(self.settings, thinking)

    def _parser(self, request: Any) -> Any:
        return self.parser_class(self.tokenizer, request.tools, chat_template_kwargs=self.chat_template_kwargs)

    def parse(self, raw: str, *, tools: bool) -> Parsed:
        request = self._request(tools, stream=False)
        parser = self._parser(request)
        parser.set_prompt_token_ids(self._prompt_token_ids())
        reasoning, content, calls = parser.parse(
            raw,
            request,
            enable_auto_tools=True,
            model_output_token_ids=self.tokenizer.encode(raw, add_special_tokens=False),
        )
        fields = self.vllm.assemble(
            request, reasoning, content, calls, enable_auto_tools=True, parser_cls=self.parser_class
        )
        return Parsed(
            fields.reasoning or "",
            fields.content or "",
            tuple(ParsedCall(call.function.name, call.function.arguments, call.id) for call in fields.tool_calls),
        )

    def stream(self, *, tools: bool) -> _VLLMStream:
        request = self._request(tools, stream=True)
        processor = self.vllm.stream_processor(
            request, self._parser(request), enable_auto_tools=True, parser_cls=self.parser_class
        )
        return _VLLMStream(processor, self.tokenizer, self._prompt_token_ids())


@cache
def _with_thinking(settings: ParserSettings, thinking: bool) -> VLLMParser:
    return VLLMParser(settings, thinking=thinking)


class _VLLMStream:
    """One `ChatStreamProcessor.step` per chunk of whole tokens, the last one with a finish reason."""

    def __init__(self, processor: Any, tokenizer: Any, prompt_token_ids: list[int]) -> None:
        self.processor = processor
        self.tokenizer = tokenizer
        self.prompt_token_ids = prompt_token_ids  # sent with every chunk, as vLLM's server does
        self.held = ""  # the start of a special token that the next piece completes
        self.calls_sent: dict[int, ParsedCall] = {}

    def feed(self, piece: str) -> Parsed:
        text = self.held + piece
        cut = len(text) - _partial_special_token_length(text)
        self.held = text[cut:]
        return self._step(text[:cut], finish_reason=None) if cut else Parsed()

    def finish(self) -> Parsed:
        # What is still held never became a special token: it is text.
        text, self.held = self.held, ""
        return self._step(text, finish_reason="stop")

    def _step(self, text: str, finish_reason: str | None) -> Parsed:
        token_ids = self.tokenizer.encode(text, add_special_tokens=False)
        delta = self.processor.step(text, token_ids, finish_reason, self.prompt_token_ids).delta
        if delta is None:
            return Parsed()
        return Parsed(delta.reasoning or "", delta.content or "", self._calls(delta.tool_calls))

    def _calls(self, deltas: list[Any]) -> tuple[ParsedCall, ...]:
        # K3's tool parser sends each call whole, in one delta; a call sent in pieces would need a
        # wire layer that streams arguments, so it is an error rather than a silently wrong call.
        calls: list[ParsedCall] = []
        for delta in deltas:
            if delta.index in self.calls_sent or delta.function is None:
                raise RuntimeError(f"vLLM streamed tool call {delta.index} in pieces: {delta!r}")
            function = delta.function if isinstance(delta.function, dict) else delta.function.model_dump()
            call = ParsedCall(function.get("name") or "", function.get("arguments") or "", delta.id)
            self.calls_sent[delta.index] = call
            calls.append(call)
        return tuple(calls)


def _partial_special_token_length(text: str) -> int:
    """The length of the longest end of `text` that is the unfinished start of a special token."""
    for length in range(min(len(text), max(map(len, _SPECIAL_TOKENS)) - 1), 0, -1):
        if any(token.startswith(text[-length:]) and token != text[-length:] for token in _SPECIAL_TOKENS):
            return length
    return 0
