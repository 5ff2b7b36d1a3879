"""K3's raw output: the text the model emits before any parser runs, and its token stream.

The simulator decides what the model says (a `SimulatedTurn`, or anything shaped like a `Turn`);
this module writes it in K3's wire format ("XTML", see xtml/markup.py) as the model would emit it, and cuts it into the
pieces a streaming server detokenizes one step at a time. The pieces come from a seeded,
tokenizer-like splitter that ignores marker boundaries, so that over many requests every
marker is split in every possible place, as real multi-token markers are.
"""

from __future__ import annotations

import json
import random
import zlib
from collections.abc import Sequence
from typing import Protocol

from k3conformance.xtml.markup import (
    CALL_CLOSE,
    MESSAGE_CLOSE,
    RESPONSE_CLOSE,
    RESPONSE_OPEN,
    THINK_CLOSE,
    THINK_OPEN,
    xtml_tools_block,
)


class Call(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def arguments(self) -> str: ...  # JSON text


class Turn(Protocol):
    """What a model turn says, before it is written as raw text."""

    @property
    def reasoning(self) -> str: ...
    @property
    def content(self) -> str | None: ...
    @property
    def tool_calls(self) -> Sequence[Call]: ...
    @property
    def finish_reason(self) -> str: ...


# K3's encoder numbers the calls of a message from 1 (Kimi-K3.jinja as llama.cpp vendors it:
# `index` is jinja's loop.index), and SGLang's structural tag only allows `[1-9][0-9]*`
# (kimik3_structural_tag.py): a 0 is a value the model never writes.
CALL_INDEX_BASE = 1
_ARGUMENT_CLOSE = "<|close|>argument<|sep|>"
# A streaming step carries 1 to this many characters: about four words on average, as before.
_MAX_PIECE_CHARS = 40


def render(completion: Turn) -> str:
    """The raw text of `completion`: think block, response block, tools block, end of turn.

    A turn cut by max_tokens ends where the budget ran out, without its closing markers; one
    cut inside its tools block lists the call it cut last.
    """
    truncated = completion.finish_reason == "length"
    parts: list[str] = []
    if completion.reasoning:
        parts += [THINK_OPEN, completion.reasoning]
        if truncated and not completion.content and not completion.tool_calls:
            return "".join(parts)  # the budget ran out inside the think block
        parts.append(THINK_CLOSE)
    if completion.content is not None:
        parts += [RESPONSE_OPEN, completion.content]
        if truncated:
            return "".join(parts)
        parts.append(RESPONSE_CLOSE)
    if completion.tool_calls:
        block = xtml_tools_block(
            (call.name, index, _arguments(call.arguments))
            for index, call in enumerate(completion.tool_calls, start=CALL_INDEX_BASE)
        )
        if truncated:
            # The budget ran out inside the last call's arguments: before its last value's close
            # (its own close, if it has none), so neither the call nor the tools block is closed.
            cut = block.rindex(_ARGUMENT_CLOSE) if _ARGUMENT_CLOSE in block else block.rindex(CALL_CLOSE)
            return "".join(parts) + block[:cut]
        parts.append(block)
    if not truncated:
        parts.append(MESSAGE_CLOSE)
    return "".join(parts)


def _arguments(arguments_json: str) -> dict[str, object]:
    arguments = json.loads(arguments_json)
    return arguments if isinstance(arguments, dict) else {}


def token_pieces(raw: str) -> list[str]:
    """`raw` cut into streaming steps at seeded positions (the seed is the text itself, so a
    request always streams the same way) that join back to exactly `raw`."""
    rng = random.Random(zlib.crc32(raw.encode()))
    pieces: list[str] = []
    start = 0
    while start < len(raw):
        end = start + rng.randint(1, _MAX_PIECE_CHARS)
        pieces.append(raw[start:end])
        start = end
    return pieces
