"""Serving markup that must never reach an API field.

K3's raw wire format ("XTML") wraps everything in `<|open|>NAME<|sep|> … <|close|>NAME<|sep|>`
blocks (think, response, message, tools, call, argument); K2 used
`<|tool_calls_section_begin|>`-style tokens and `<think>` tags. The parsers are meant to
turn all of it into `reasoning_content`, `content` and `tool_calls`; what they miss shows up
here. Checked on reassembled text, so a marker split across stream chunks is whole again.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping

# K3's markers, as SGLang's kimik3_format.py and vLLM's kimi_k3 parsers spell them.
THINK_OPEN = "<|open|>think<|sep|>"
THINK_CLOSE = "<|close|>think<|sep|>"
RESPONSE_OPEN = "<|open|>response<|sep|>"
RESPONSE_CLOSE = "<|close|>response<|sep|>"
TOOLS_OPEN = "<|open|>tools<|sep|>"
TOOLS_CLOSE = "<|close|>tools<|sep|>"
CALL_CLOSE = "<|close|>call<|sep|>"
MESSAGE_CLOSE = "<|close|>message<|sep|>"

# Whole special tokens (<|open|>, <|close|>, <|sep|>, <|tool_call_begin|>, <|im_end|>, ...),
# K2's think tags, and raw stop-token names.
_WHOLE = r"<\|[A-Za-z0-9_]+\|>|</?think>|\bstop_\d{5,}\b"
# The names of K3's and K2's special tokens, which a cut marker still shows.
_TOKEN_NAMES = (
    r"open|close|sep|end_of_msg|im_end|im_start|tool_calls?_section_(?:begin|end)|tool_call_(?:argument_)?(?:begin|end)"
)
# A marker cut by max_tokens or a stream boundary: `Paris<|close|` or `<|clo` at the end, or the
# tail of one whose `<|` went missing (`close|>`). Only token names count: Haskell's `<|` stays prose.
_CUT = (
    rf"<\|(?:{_TOKEN_NAMES})(?:\|(?!>)|(?![|\w]))"
    r"|<\|(?:o|op|ope|c|cl|clo|clos|s|se)?$"
    r"|(?<![<|\w])(?:open|close|sep)\|>"
)
# XTML whose special tokens a detokenizer dropped: the call and argument headers remain as text
# (`toolscall tool="get_weather" index="1"`); the same element in real XML starts with `<`.
_STRIPPED_XTML = (
    r'(?<!<)call tool="[^"\n]*" index="\d+"'
    r'|(?<!<)argument key="[^"\n]*" type="(?:string|number|integer|boolean|array|object|null)"'
)
# K2's section markers with the special-token brackets dropped, and K2's bare call headers
# (`functions.get_weather:0{...}`), which only a tool-call parser should ever see.
_K2_BARE = (
    r"\btool_calls_section_(?:begin|end)\b|\btool_call_(?:argument_)?begin\b"
    r"|\bfunctions\.[A-Za-z_][\w.-]*:\d+(?=\s*\{|<\|)"
)
_MARKUP = re.compile("|".join((_WHOLE, _CUT, _STRIPPED_XTML, _K2_BARE)))
XTML_BLOCKS = ("think", "response", "message", "tools", "call", "argument")
# `</response>`-style closers of XTML blocks: markup when nothing opened them, since a
# legitimate XML or HTML answer (<response>...</response>) opens every element it closes.
_CLOSER = re.compile(r"</(think|response|message|tools|call|argument)>")


def find_markup(text: str | None) -> list[str]:
    """Distinct pieces of serving markup found in `text`, in order of first appearance."""
    if not text:
        return []
    found = [(match.start(), match.group(0)) for match in _MARKUP.finditer(text)]
    found.extend((match.start(), match.group(0)) for match in _CLOSER.finditer(text) if _unopened(text, match))
    return list(dict.fromkeys(piece for _, piece in sorted(found)))


def _unopened(text: str, closer: re.Match[str]) -> bool:
    name = closer.group(1)
    before = text[: closer.start()]
    opened = len(re.findall(rf"<{name}[\s>]", before))
    return before.count(f"</{name}>") >= opened


# XTML names an argument's JSON type, with integers under "number" (SGLang's
# kimik3_structural_tag.py maps both to it); string values are raw text, others JSON.
def xtml_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):  # before the numbers: bool is a subclass of int
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _attribute(value: str) -> str:
    # The chat template escapes attribute values; the parsers unescape &quot; and &amp;.
    return value.replace("&", "&amp;").replace('"', "&quot;")


def xtml_tool_call(name: str, index: int, arguments: Mapping[str, object]) -> str:
    """K3's raw markup for one tool call, as the model writes it before the tool-call parser reads it."""
    parts = [f'<|open|>call tool="{_attribute(name)}" index="{index}"<|sep|>']
    for key, value in arguments.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        parts.append(
            f'<|open|>argument key="{_attribute(key)}" type="{xtml_type(value)}"<|sep|>{text}<|close|>argument<|sep|>'
        )
    parts.append(CALL_CLOSE)
    return "".join(parts)


def xtml_tools_block(calls: Iterable[tuple[str, int, Mapping[str, object]]]) -> str:
    """K3's tools channel holding (name, index, arguments) calls."""
    return TOOLS_OPEN + "".join(xtml_tool_call(*call) for call in calls) + TOOLS_CLOSE
