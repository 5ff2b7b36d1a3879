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
    raise ParserUnavailable(f"unknown parser {name!r}; known parsers: {', '.join(PARSER_NAMES)}")
