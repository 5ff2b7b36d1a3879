"""Parsers that turn K3's raw output into OpenAI message fields, behind one protocol.

`builtin` is ours (pure Python, always there). `sglang` runs SGLang's own `kimi_k3`
reasoning and tool-call detectors (the `sglang-parsers` extra), `vllm` vLLM's (the `vllm-parsers`
extra). The reference deployment
renders what the model says as raw text (xtml/writer.py) and lets the profile's parser read
it, so a parsing fault is a fault of the raw text or of the parser's configuration.
"""

from __future__ import annotations

from k3conformance.xtml.parsers.base import (
    PARSER_NAMES,
    REFERENCE_PARSER_NAMES,
    WHOLE_ONLY_PARSER_NAMES,
    Parsed,
    ParsedCall,
    ParseRefused,
    ParserSettings,
    ParserUnavailable,
    StreamingParse,
    WireParser,
    installed_version,
)

__all__ = [
    "PARSER_NAMES",
    "REFERENCE_PARSER_NAMES",
    "WHOLE_ONLY_PARSER_NAMES",
    "ParseRefused",
    "Parsed",
    "ParsedCall",
    "ParserSettings",
    "ParserUnavailable",
    "StreamingParse",
    "WireParser",
    "installed_version",
    "make_parser",
]


# K3's recipe: the parsers as a healthy server configures them.
HEALTHY = ParserSettings()


def make_parser(name: str, settings: ParserSettings = HEALTHY) -> WireParser:
    if name == "builtin":
        from k3conformance.xtml.parsers.builtin import BuiltinParser

        return BuiltinParser(settings)
    if name == "sglang":
        from k3conformance.xtml.parsers.sglang import SGLangParser

        return SGLangParser(settings)
    if name == "vllm":
        from k3conformance.xtml.parsers.vllm import VLLMParser

        return VLLMParser(settings)
    if name == "llamacpp":
        from k3conformance.xtml.parsers.llamacpp import LlamaCppParser

        if settings != HEALTHY:
            # llama.cpp's handler is what it is: a parser bug is reproduced by the builtin parser only.
            raise ParserUnavailable(
                "llama.cpp's K3 parser runs as its server configures it; it reproduces no parser fault"
            )
        return LlamaCppParser()
    raise ParserUnavailable(f"unknown parser {name!r}; known parsers: {', '.join(REFERENCE_PARSER_NAMES)}")
