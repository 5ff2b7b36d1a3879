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

# Any special-token-like marker (<|open|>, <|close|>, <|sep|>, <|tool_call_begin|>,
# <|im_end|>, ...), K2's think tags, and raw stop-token names.
_MARKUP = re.compile(r"<\|[A-Za-z0-9_]+\|>|</?think>|\bstop_\d{5,}\b")
XTML_BLOCKS = ("think", "response", "message", "tools", "call", "argument")


def find_markup(text: str | None) -> list[str]:
    """Distinct markers found in `text`, in order of first appearance."""
    if not text:
        return []
    return list(dict.fromkeys(match.group(0) for match in _MARKUP.finditer(text)))


def xtml_tool_call(name: str, index: int, arguments: dict[str, object]) -> str:
    """K3's raw markup for one tool call, as a model writes it before the parser runs."""
    parts = [f'<|open|>call tool="{name}" index="{index}"<|sep|>']
    for key, value in arguments.items():
        kind = "string" if isinstance(value, str) else type(value).__name__
        text = value if isinstance(value, str) else json.dumps(value)
        parts.append(f'<|open|>argument key="{key}" type="{kind}"<|sep|>{text}<|close|>argument<|sep|>')
    parts.append("<|close|>call<|sep|>")
    return "".join(parts)
