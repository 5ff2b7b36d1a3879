"""SGLang's own kimi_k3 parsers (the `sglang-parsers` extra), run in process without torch.

`sglang/__init__.py` imports torch and the whole runtime; the parsers need neither. So the
`sglang` package is registered as an empty package with its real search path (its
subpackages are namespace packages and import as usual), and `xgrammar`, which the tool
detector imports only to build structural tags, is stood in for (see `_xgrammar_stand_in`). Both stand-ins go into `sys.modules` only when the real
modules are absent from it, and `tests/unit/xtml/test_wire_parsers.py` checks the real detector classes load.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from functools import cache
from typing import Any

from k3conformance.xtml.parsers.base import Parsed, ParsedCall, ParserSettings, ParserUnavailable, installed_version

INSTALL_HINT = "install the SGLang parsers: pip install 'k3conformance[sglang-parsers]' && pip install --no-deps sglang"


def _xgrammar_stand_in() -> tuple[types.ModuleType, types.ModuleType]:
    """xgrammar and xgrammar.structural_tag, as far as importing SGLang's parsers needs them.

    `StructuralTag` is `Any`, which is SGLang's own fallback when xgrammar is missing
    (entrypoints/openai/protocol.py); every other name (the structural-tag format classes)
    is a class that refuses to be built. Only constrained decoding builds them; parsing never does.
    """

    def placeholder(name: str) -> type:
        def refuse(*args: object, **kwargs: object) -> None:
            raise ParserUnavailable(f"xgrammar.{name} needs the real xgrammar package (structural tags)")

        return type(name, (), {"__init__": refuse})

    package = types.ModuleType("xgrammar")
    package.__path__ = []
    package.StructuralTag = Any  # type: ignore[attr-defined]
    package.__getattr__ = placeholder  # type: ignore[method-assign]
    formats = types.ModuleType("xgrammar.structural_tag")
    formats.__getattr__ = placeholder  # type: ignore[method-assign]
    package.structural_tag = formats  # type: ignore[attr-defined]
    return package, formats


@cache
def _detector_classes() -> tuple[Any, Any]:
    """(reasoning detector class, tool-call detector class) from the installed sglang."""
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise ParserUnavailable(f"sglang is not installed; {INSTALL_HINT}")
    if "sglang" not in sys.modules:
        package = types.ModuleType("sglang")
        package.__spec__ = spec
        package.__path__ = list(spec.submodule_search_locations)
        sys.modules["sglang"] = package
    if "xgrammar" not in sys.modules and importlib.util.find_spec("xgrammar") is None:
        sys.modules["xgrammar"], sys.modules["xgrammar.structural_tag"] = _xgrammar_stand_in()
    try:
        reasoning = importlib.import_module("sglang.srt.parser.reasoning_parser").ReasoningParser.DetectorMap["kimi_k3"]
        tool_calls = importlib.import_module("sglang.srt.function_call.kimik3_detector").KimiK3Detector
    except Exception as error:  # an import error, or one of sglang's import-time checks
        raise ParserUnavailable(f"sglang's kimi_k3 parsers did not load ({error!r}); {INSTALL_HINT}") from error
    return reasoning, tool_calls


class SGLangParser:
    """SGLang's detectors as its server builds them for kimi_k3: force_reasoning is left to the
    detector's default (True: the output may begin inside the think block the prompt opened)."""

    name = "sglang"

    def __init__(self, settings: ParserSettings) -> None:
        if settings != ParserSettings(reasoning=settings.reasoning):
            raise ParserUnavailable("only the builtin parser reproduces parser bugs; SGLang's has them or not")
        self.settings = settings
        self.reasoning_class, self.tool_class = _detector_classes()
        self.version = installed_version("sglang")

    def parse(self, raw: str, *, tools: bool) -> Parsed:
        reasoning, text = "", raw
        if self.settings.reasoning:
            result = self.reasoning_class(stream_reasoning=False).detect_and_parse(raw)
            reasoning, text = result.reasoning_text or "", result.normal_text or ""
        if not tools:
            return Parsed(reasoning, text)
        result = self.tool_class().detect_and_parse(text, [])
        calls = tuple(ParsedCall(call.name or "", call.parameters) for call in result.calls)
        return Parsed(reasoning, result.normal_text or "", calls)

    def stream(self, *, tools: bool) -> _SGLangStream:
        reasoning = self.reasoning_class(stream_reasoning=True) if self.settings.reasoning else None
        return _SGLangStream(reasoning, self.tool_class() if tools else None)


class _SGLangStream:
    """SGLang's serving order: the reasoning detector first, its normal text to the tool detector."""

    def __init__(self, reasoning: Any, tool_calls: Any) -> None:
        self.reasoning = reasoning
        self.tool_calls = tool_calls

    def feed(self, piece: str) -> Parsed:
        reasoning, text = "", piece
        if self.reasoning is not None:
            result = self.reasoning.parse_streaming_increment(piece)
            reasoning, text = result.reasoning_text or "", result.normal_text or ""
        return self._with_calls(reasoning, text)

    def finish(self) -> Parsed:
        reasoning, text = "", ""
        if self.reasoning is not None:
            result = self.reasoning.finish()
            reasoning, text = result.reasoning_text or "", result.normal_text or ""
        parsed = self._with_calls(reasoning, text)
        if self.tool_calls is None:
            return parsed
        rest = self.tool_calls.finish([])
        calls = tuple(ParsedCall(call.name or "", call.parameters) for call in rest.calls)
        return Parsed(parsed.reasoning, parsed.content + (rest.normal_text or ""), parsed.calls + calls)

    def _with_calls(self, reasoning: str, text: str) -> Parsed:
        if self.tool_calls is None or not text:
            return Parsed(reasoning, text)
        result = self.tool_calls.parse_streaming_increment(text, [])
        calls = tuple(ParsedCall(call.name or "", call.parameters) for call in result.calls)
        return Parsed(reasoning, result.normal_text or "", calls)
