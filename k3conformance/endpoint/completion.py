"""One chat completion as the plugin sees it, whether it arrived whole or as a stream.

Streams are reassembled into the same `Completion` so the same assertions apply to
both modes; what only a stream can get wrong (frame order, repeated names, null
reasoning on every frame, missing finish frame) is kept in `StreamStats`.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

# SGLang names the field `reasoning_content`; newer vLLM names it `reasoning`.
REASONING_FIELDS = ("reasoning_content", "reasoning")
# The finish reasons of the OpenAI chat API; anything else (`stop_163586`) is a serving bug.
FINISH_REASONS = ("stop", "length", "tool_calls", "content_filter")


@dataclass
class ToolCallStream:
    """How one tool call arrived in a stream: K3 parsers emit a call whole once its block
    closes, and broken ones repeat the name or id on every frame."""

    name_frames: int = 0
    id_frames: int = 0
    argument_frames: int = 0
    first_frame: int = -1
    last_frame: int = -1
    first_at_s: float = 0.0
    last_at_s: float = 0.0
    # Seconds between the frame before this call's first delta and that delta: K3's
    # parsers hold a call back until its block closes, so long silences are expected.
    silence_before_s: float = 0.0


@dataclass
class StreamStats:
    frames: int = 0
    finish_frames: int = 0
    usage_frames: int = 0
    role_frames: int = 0
    first_reasoning_frame: int | None = None
    last_reasoning_frame: int | None = None
    first_content_frame: int | None = None
    last_content_frame: int | None = None
    # Frames that carried a reasoning field set to null: harmless alone, a fault when
    # every frame does it and the reasoning is lost (SGLang issue 39898).
    null_reasoning_frames: int = 0
    done_marker: bool = False
    tool_calls: dict[int, ToolCallStream] = field(default_factory=dict)


@dataclass
class Completion:
    content: str | None
    reasoning: str | None
    # Which field carried the reasoning (`reasoning_content` or `reasoning`), or None.
    reasoning_field: str | None
    # None when the server sent no `tool_calls` field; [] is kept as [] because an empty
    # list with finish_reason "tool_calls" is itself a known parser failure.
    tool_calls: list[dict[str, Any]] | None
    finish_reason: str | None
    usage: dict[str, Any] | None
    model: str | None
    latency_s: float
    ttft_s: float | None = None
    stream: StreamStats | None = None
    # The server's id of this response: what only the live exchange has (a replay repeats another run's).
    response_id: str | None = None

    def to_record(self) -> dict[str, Any]:
        return asdict(self)

    def as_history_message(self) -> dict[str, Any]:
        """This answer as an assistant turn of a later request, with its reasoning (K3's chat
        template keeps earlier thinking when preserve_thinking is on) and its tool calls. A
        missing reasoning is left out, not sent as null: llama.cpp's server answers a null
        with HTTP 500, and the reference deployment with a 400."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.reasoning is not None:
            message["reasoning_content"] = self.reasoning
        if self.tool_calls:
            message["tool_calls"] = self.tool_calls
        return message

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> Completion:
        values = dict(data)
        stream = values.get("stream")
        if stream is not None:
            tool_streams = {int(k): ToolCallStream(**v) for k, v in stream.get("tool_calls", {}).items()}
            values["stream"] = StreamStats(**{**stream, "tool_calls": tool_streams})
        return cls(**values)


def _reasoning_of(message: dict[str, Any]) -> tuple[str | None, str | None]:
    for name in REASONING_FIELDS:
        value = message.get(name)
        if isinstance(value, str):
            return value, name
    return None, None


def _tool_call_of(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    return {
        "id": call.get("id"),
        "type": call.get("type"),
        "function": {"name": function.get("name"), "arguments": function.get("arguments")},
    }


def _text_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


def from_message(response: dict[str, Any], started: float) -> Completion:
    """A non-streaming `chat.completion` object, as parsed JSON."""
    latency = time.monotonic() - started
    choices = response.get("choices") or []
    choice: dict[str, Any] = choices[0] if choices else {}
    message: dict[str, Any] = choice.get("message") or {}
    reasoning, reasoning_field = _reasoning_of(message)
    raw_calls = message.get("tool_calls")
    return Completion(
        content=message.get("content"),
        reasoning=reasoning,
        reasoning_field=reasoning_field,
        tool_calls=None if raw_calls is None else [_tool_call_of(call) for call in raw_calls],
        finish_reason=choice.get("finish_reason"),
        usage=response.get("usage"),
        model=response.get("model"),
        latency_s=latency,
        response_id=_text_or_none(response.get("id")),
    )


class StreamAssembler:
    """Feeds on the parsed JSON of `chat.completion.chunk` frames and builds the
    `Completion` they add up to. Raw frames, not SDK objects: what a broken server puts
    in them (null fields, repeated names) is exactly what the checks look for."""

    def __init__(self, started: float) -> None:
        self._started = started
        self._content: list[str] = []
        self._reasoning: list[str] = []
        self._reasoning_field: str | None = None
        self._calls: dict[int, dict[str, Any]] = {}
        self._saw_tool_calls_field = False
        self._finish_reason: str | None = None
        self._usage: dict[str, Any] | None = None
        self._model: str | None = None
        self._response_id: str | None = None
        self._ttft: float | None = None
        self._previous_frame_at = 0.0
        self._frame_at = 0.0
        self.stats = StreamStats()

    @property
    def finished(self) -> bool:
        return self._finish_reason is not None

    def feed(self, chunk: dict[str, Any]) -> None:
        stats = self.stats
        frame = stats.frames
        stats.frames += 1
        self._previous_frame_at, self._frame_at = self._frame_at, time.monotonic() - self._started
        self._model = self._model or chunk.get("model")
        self._response_id = self._response_id or _text_or_none(chunk.get("id"))
        usage = chunk.get("usage")
        if usage:
            stats.usage_frames += 1
            self._usage = usage
        choices = chunk.get("choices")
        if not choices:
            return
        choice = choices[0]
        if choice.get("finish_reason") is not None:
            stats.finish_frames += 1
            self._finish_reason = choice["finish_reason"]
        delta = choice.get("delta")
        if not delta:
            return
        if delta.get("role"):
            stats.role_frames += 1
        for name in REASONING_FIELDS:
            if name not in delta:
                continue
            value = delta[name]
            if value is None:
                stats.null_reasoning_frames += 1
            elif value:
                self._reasoning.append(value)
                self._reasoning_field = self._reasoning_field or name
                self._mark_first_token()
                if stats.first_reasoning_frame is None:
                    stats.first_reasoning_frame = frame
                stats.last_reasoning_frame = frame
        content = delta.get("content")
        if content:
            self._content.append(content)
            self._mark_first_token()
            if stats.first_content_frame is None:
                stats.first_content_frame = frame
            stats.last_content_frame = frame
        tool_calls = delta.get("tool_calls")
        if tool_calls is not None:
            self._saw_tool_calls_field = True
            for call in tool_calls:
                self._feed_tool_call(call, frame)

    def _mark_first_token(self) -> None:
        if self._ttft is None:
            self._ttft = time.monotonic() - self._started

    def _feed_tool_call(self, call: dict[str, Any], frame: int) -> None:
        self._mark_first_token()
        now = self._frame_at
        index = call.get("index")
        index = index if isinstance(index, int) else len(self._calls)
        assembled = self._calls.setdefault(
            index, {"id": None, "type": "function", "function": {"name": None, "arguments": ""}}
        )
        seen = self.stats.tool_calls.setdefault(
            index, ToolCallStream(first_frame=frame, first_at_s=now, silence_before_s=now - self._previous_frame_at)
        )
        seen.last_frame, seen.last_at_s = frame, now
        if call.get("id"):
            seen.id_frames += 1
            assembled["id"] = assembled["id"] or call["id"]
        if call.get("type"):
            assembled["type"] = call["type"]
        function = call.get("function") or {}
        if function.get("name"):
            seen.name_frames += 1
            # A name repeated on later frames is a stream fault we count, not a new name.
            assembled["function"]["name"] = assembled["function"]["name"] or function["name"]
        if function.get("arguments"):
            seen.argument_frames += 1
            assembled["function"]["arguments"] += function["arguments"]

    def result(self) -> Completion:
        tool_calls = None
        if self._saw_tool_calls_field:
            tool_calls = [self._calls[index] for index in sorted(self._calls)]
        return Completion(
            content="".join(self._content),
            reasoning="".join(self._reasoning) if self._reasoning_field else None,
            reasoning_field=self._reasoning_field,
            tool_calls=tool_calls,
            finish_reason=self._finish_reason,
            usage=self._usage,
            model=self._model,
            latency_s=time.monotonic() - self._started,
            ttft_s=self._ttft,
            stream=self.stats,
            response_id=self._response_id,
        )
