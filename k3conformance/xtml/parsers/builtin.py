"""Our own K3 parser: reasoning, content and tool calls from raw XTML, whole or a step at a time.

It follows SGLang's kimi_k3 detectors where they agree with vLLM's: an output may begin inside
the think block that the prompt opened; a call is emitted whole
once `<|close|>call<|sep|>` arrives; string arguments stay raw text, other types are JSON
(raw text when they do not parse); attribute values unescape `&quot;` and `&amp;`; a tools
block still open when the output ends is dropped; a marker cut off at the end is dropped.
It also reads two forms found in the trackers and K3's encoder (issue 23): a think close whose
`<|sep|>` the model dropped before opening the next block (SGLang PR 32567), and a call's
arguments written as one `json` block (Kimi-K3.jinja's form for arguments given as a string).
"""

from __future__ import annotations

import json
import re
from typing import Literal

from k3conformance.xtml.markup import (
    MESSAGE_CLOSE,
    RESPONSE_CLOSE,
    RESPONSE_OPEN,
    THINK_CLOSE,
    THINK_OPEN,
    TOOLS_CLOSE,
    TOOLS_OPEN,
)
from k3conformance.xtml.parsers import Parsed, ParsedCall, ParserSettings

_CALL = re.compile(
    r"<\|open\|>call\s+(?P<attrs>(?:(?!<\|sep\|>).)*?)<\|sep\|>(?P<body>.*?)<\|close\|>call<\|sep\|>", re.DOTALL
)
_ARGUMENT = re.compile(
    r"<\|open\|>argument\s+(?P<attrs>(?:(?!<\|sep\|>).)*?)<\|sep\|>(?P<value>.*?)<\|close\|>argument<\|sep\|>",
    re.DOTALL,
)
_ATTRIBUTE = re.compile(r'(?P<key>\w+)="(?P<value>[^"]*)"')

# "start": nothing decided yet. K3 servers put the think-open marker in the prompt (the chat
# template's generation prefix), so an output may begin inside the think block; text before
# the first marker is reasoning when that marker closes the think block, content otherwise.
Channel = Literal["start", "think", "response", "loose", "tools"]
_NEXT_CHANNEL = {THINK_OPEN: "think", THINK_CLOSE: "loose", RESPONSE_OPEN: "response", RESPONSE_CLOSE: "loose"}
# After tool results K3 sometimes drops the think close's <|sep|> and opens the next block at
# once (SGLang PR 32567): `<|close|>think` followed by `<|open|>` closes the think block too.
_THINK_CLOSE_ELIDED = "<|close|>think<|open|>"
_ELIDED_LENGTH = len("<|close|>think")
# A call's arguments as one JSON object, the form K3's encoder writes for arguments given as
# a string (Kimi-K3.jinja as llama.cpp vendors it): read when the call has no argument blocks.
_JSON_BLOCK = re.compile(r"<\|open\|>json(?:\s+[^<]*?)?<\|sep\|>(?P<value>.*?)<\|close\|>json<\|sep\|>", re.DOTALL)


class BuiltinParser:
    name = "builtin"
    version = "k3conformance"

    def __init__(self, settings: ParserSettings) -> None:
        self.settings = settings

    def parse(self, raw: str, *, tools: bool) -> Parsed:
        scanner = _Scanner(self.settings, tools, streaming=False)
        return _joined(scanner.feed(raw), scanner.finish())

    def stream(self, *, tools: bool) -> _Scanner:
        return _Scanner(self.settings, tools, streaming=True)


def _first_channel(settings: ParserSettings) -> Channel:
    """Where an output begins: inside the think block the prompt opened, undecided until the
    first marker, or (a detector not forced into reasoning) outside every block."""
    if not settings.reasoning or (settings.undecided_until_first_marker and settings.forced_reasoning):
        return "start"
    return "think" if settings.forced_reasoning else "loose"


def _joined(first: Parsed, second: Parsed) -> Parsed:
    return Parsed(first.reasoning + second.reasoning, first.content + second.content, first.calls + second.calls)


class _Scanner:
    """A marker-by-marker reader: text goes to the current channel, markers switch channels,
    and a possible marker cut at the end of what has arrived is held back until the next step."""

    def __init__(self, settings: ParserSettings, tools: bool, *, streaming: bool) -> None:
        self.settings = settings
        self.channel: Channel = _first_channel(settings)
        self.undecided: list[str] = []
        markers = [RESPONSE_OPEN, RESPONSE_CLOSE, MESSAGE_CLOSE]
        if settings.reasoning:
            markers += [THINK_OPEN, THINK_CLOSE, _THINK_CLOSE_ELIDED]
        if tools and settings.recognises_calls:
            markers.append(TOOLS_OPEN)
        # The markers that end an open think block: all of them, or (a parser that leaves
        # it only at its own close) the think close alone.
        ends_early = settings.later_channels_end_think_in_streams if streaming else settings.later_channels_end_think
        self.think_markers = tuple(markers) if ends_early else tuple(m for m in markers if m == THINK_CLOSE)
        # Outside the think block: a detector that was not forced into it sees no think close there.
        think_closes = () if settings.forced_reasoning else (THINK_CLOSE, _THINK_CLOSE_ELIDED)
        self.markers = tuple(m for m in markers if m not in think_closes)
        self.leak_message_close = streaming and not settings.strips_message_close_in_streams
        self.pending = ""
        self.tools_text = ""
        self.calls_sent = 0

    def feed(self, piece: str) -> Parsed:
        self.pending += piece
        reasoning: list[str] = []
        content: list[str] = []
        calls: list[ParsedCall] = []

        def emit(text: str) -> None:
            if self.channel == "start":
                self.undecided.append(text)
            else:
                (reasoning if self.channel == "think" else content).append(text)

        while self.pending:
            if self.channel == "tools":
                self.tools_text += self.pending
                self.pending = ""
                end = self.tools_text.find(TOOLS_CLOSE)
                if end != -1:
                    self.pending = self.tools_text[end + len(TOOLS_CLOSE) :]
                    self.tools_text = self.tools_text[:end]
                if end != -1 or self.settings.calls_before_tools_close:
                    calls += self._new_calls()
                if end == -1:
                    break
                self.channel = "loose"
                continue
            start = self.pending.find("<|")
            if start == -1:
                # A last "<" may begin a marker that the next step completes.
                held = 1 if self.pending.endswith("<") else 0
                emit(self.pending[: len(self.pending) - held])
                self.pending = self.pending[len(self.pending) - held :]
                break
            if start:
                emit(self.pending[:start])
                self.pending = self.pending[start:]
            markers = self.think_markers if self.channel == "think" else self.markers
            marker = next((m for m in markers if self.pending.startswith(m)), None)
            if marker is None:
                if any(m.startswith(self.pending) for m in markers):
                    break  # the rest of a marker is still to come
                emit("<|")
                self.pending = self.pending[2:]
                continue
            if marker == _THINK_CLOSE_ELIDED:
                marker = THINK_CLOSE  # its <|open|> stays, to open the next block
                self.pending = self.pending[_ELIDED_LENGTH:]
            else:
                self.pending = self.pending[len(marker) :]
            if self.channel == "start":
                (reasoning if marker == THINK_CLOSE else content).extend(self.undecided)
                self.undecided.clear()
            if marker == TOOLS_OPEN:
                self.channel, self.tools_text, self.calls_sent = "tools", "", 0
            elif marker == MESSAGE_CLOSE:
                if self.leak_message_close:
                    content.append(marker)
                self.channel = "loose"
            else:
                self.channel = _NEXT_CHANNEL[marker]  # type: ignore[assignment]
        return Parsed("".join(reasoning), "".join(content), tuple(calls))

    def finish(self) -> Parsed:
        # A marker cut off by the end of the output is dropped; so is an unclosed tools block's
        # rest. A last lone "<" was held in case a marker began there: K3's markers are special
        # tokens, so a cut leaves no "<" of one, and it is text. Text that met no marker at all is
        # reasoning when the reasoning parser runs (the prompt opened the think block and the
        # budget ran out in it: SGLang PR 34187, vLLM issue 57353), else content.
        last = self.pending if self.pending == "<" and self.channel != "tools" else ""
        self.pending = ""
        text = "".join(self.undecided) + last
        self.undecided.clear()
        if self.channel == "think" or (self.channel == "start" and self.settings.reasoning):
            return Parsed(reasoning=text)
        return Parsed(content=text)

    def _new_calls(self) -> list[ParsedCall]:
        found = [self._call(match) for match in _CALL.finditer(self.tools_text)]
        complete = [call for call in found if call is not None]
        new = complete[self.calls_sent :]
        self.calls_sent = len(complete)
        return new

    def _call(self, match: re.Match[str]) -> ParsedCall | None:
        name = _attributes(match["attrs"]).get("tool", "")
        if not name:
            return None
        arguments: dict[str, object] = {}
        block = _JSON_BLOCK.search(match["body"])
        if block is not None and _ARGUMENT.search(match["body"]) is None:
            whole = _json_or_raw(block["value"])
            arguments = whole if isinstance(whole, dict) else {}
        for argument in _ARGUMENT.finditer(match["body"]):
            attributes = _attributes(argument["attrs"])
            value = argument["value"]
            if not self.settings.values_end_at_closing_marker:
                value = value.partition("<|")[0]
            declared_string = attributes.get("type", "string") == "string"
            typed = self.settings.typed_arguments and not declared_string
            guessed = declared_string and not self.settings.strings_kept_as_written and _looks_numeric(value)
            arguments[attributes.get("key", "")] = _json_or_raw(value) if typed else int(value) if guessed else value
        text = json.dumps(arguments, ensure_ascii=False)
        return ParsedCall(name, text if self.settings.complete_arguments else text[:-1])


def _attributes(text: str) -> dict[str, str]:
    return {
        match["key"]: match["value"].replace("&quot;", '"').replace("&amp;", "&") for match in _ATTRIBUTE.finditer(text)
    }


def _looks_numeric(value: str) -> bool:
    return value.isascii() and value.isdigit()


def _json_or_raw(value: str) -> object:
    try:
        return json.loads(value)
    except ValueError:
        return value
