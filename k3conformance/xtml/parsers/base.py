"""What every parser adapter shares: the parsed output, the parser settings, the protocols and errors.

Apart from `__init__.py` (which picks an adapter by name) so that the adapters import these
without importing the module that imports them.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from typing import Protocol

PARSER_NAMES = ("builtin", "sglang", "vllm")
# Parsers that read whole outputs only: llama.cpp's, behind its server, which streams only what
# it generates (xtml/parsers/llamacpp.py). The reference deployment serves them unstreamed.
WHOLE_ONLY_PARSER_NAMES = ("llamacpp",)
# Every parser the reference deployment can read its raw output with (`reference:NAME+PARSER`).
REFERENCE_PARSER_NAMES = (*PARSER_NAMES, *WHOLE_ONLY_PARSER_NAMES)


@dataclass(frozen=True)
class ParsedCall:
    name: str
    arguments: str  # JSON text
    # The id the parser's server gives the call (vLLM's `chatcmpl-tool-<hex>`); None: the reference numbers it.
    id: str | None = None


@dataclass(frozen=True)
class Parsed:
    """What a parser made of some raw text: the whole output, or one streaming step's delta."""

    reasoning: str = ""
    content: str = ""
    calls: tuple[ParsedCall, ...] = ()


@dataclass(frozen=True)
class ParserSettings:
    """How the server's parsers are configured; the healthy defaults are K3's recipe.

    The fields other than `reasoning` reproduce bugs of particular parser versions and are
    honoured by the builtin parser only (a real parser has the bug or not).
    """

    # --reasoning-parser kimi_k3 given; without it the think block stays in the content.
    reasoning: bool = True
    # The tool-call parser recognises K3's calls; False: it passes the tools block through as text.
    recognises_calls: bool = True
    # Argument values typed by their XTML type attribute; False: every value stays a string.
    typed_arguments: bool = True
    # The arguments' JSON whole; False: the argument block is closed one character early and
    # the JSON loses its closing brace.
    complete_arguments: bool = True
    # Streams drop the <|close|>message<|sep|> end marker (non-streaming parses always do).
    strips_message_close_in_streams: bool = True
    # A string-typed value stays as written; False: one that looks like a number ("00125648")
    # is typed as one, as a parser that guesses types from the text instead of the declaration.
    strings_kept_as_written: bool = True
    # A value runs to its <|close|>argument<|sep|>; False: it ends at the first `<|`, as a naive
    # parser that takes any marker start for the value's end (values quoting K3's markers, or
    # code with `<|` in it, arrive cut short).
    values_end_at_closing_marker: bool = True
    # An output that met no marker yet is undecided until its first marker shows which channel
    # it was (SGLang PR 37743); False: it is reasoning, as a detector forced into the think
    # block by the prompt's generation prefix reads it (SGLang PR 33995: a reply written
    # without a think block comes back as reasoning, content empty).
    undecided_until_first_marker: bool = True
    # Inside the think block, a later channel's marker (response, tools) ends it as the think
    # close would (vLLM PR 53249); False: only <|close|>think<|sep|> does, so a turn whose
    # think close the model omitted is reasoning to its end, tool calls included (vLLM 53246).
    # The first for whole outputs, the second for streams.
    later_channels_end_think: bool = True
    later_channels_end_think_in_streams: bool = True
    # The reasoning detector starts inside the think block the prompt may have opened (SGLang's
    # force_reasoning); False: it starts outside and enters only at an exact <|open|>think<|sep|>,
    # and outside the block a think close is text (SGLang PR 32677: `reasoning_default` looked up
    # a template switch K3 has not, so force_reasoning was off for every K3 request).
    forced_reasoning: bool = True
    # A call is returned once its own block closes; False: only once the whole tools block
    # closes, so a block that max_tokens left unclosed loses every call in it, the complete
    # ones before the cut too (Dynamo PR 8208: Moonshot's reference parser, vLLM's and SGLang's).
    calls_before_tools_close: bool = True


class StreamingParse(Protocol):
    def feed(self, piece: str) -> Parsed: ...

    def finish(self) -> Parsed: ...


class WireParser(Protocol):
    name: str
    version: str

    def parse(self, raw: str, *, tools: bool) -> Parsed:
        """The whole output; `tools`: whether the server runs the tool-call parser on this request."""
        ...

    def stream(self, *, tools: bool) -> StreamingParse: ...


def installed_version(package: str) -> str:
    """The version a parser reports: that of the package whose code it runs."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


class ParserUnavailable(RuntimeError):
    """A parser whose package is not installed, or that cannot reproduce the asked-for settings."""


class ParseRefused(RuntimeError):
    """The parser rejected the output as a whole (llama.cpp's server answers HTTP 500)."""
