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

# Any special-token-like marker (<|open|>, <|close|>, <|sep|>, <|tool_call_begin|>,
# <|im_end|>, ...), K2's think tags, and raw stop-token names.
_MARKUP = re.compile(r"<\|[A-Za-z0-9_]+\|>|</?think>|\bstop_\d{5,}\b")
XTML_BLOCKS = ("think", "response", "message", "tools", "call", "argument")


def find_markup(text: str | None) -> list[str]:
    """Distinct markers found in `text`, in order of first appearance."""
    if not text:
        return []
    return list(dict.fromkeys(match.group(0) for match in _MARKUP.finditer(text)))


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
    parts.append("<|close|>call<|sep|>")
    return "".join(parts)


def xtml_tools_block(calls: Iterable[tuple[str, int, Mapping[str, object]]]) -> str:
    """K3's tools channel holding (name, index, arguments) calls."""
    return "<|open|>tools<|sep|>" + "".join(xtml_tool_call(*call) for call in calls) + "<|close|>tools<|sep|>"
