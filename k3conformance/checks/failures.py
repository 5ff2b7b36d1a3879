"""Failing a check with a message that says what was expected, what came back, and which
layer of the serving stack is likely at fault (`parser`, `api`, `model`, `infra`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from k3conformance.formatting import excerpt, terminal_safe

if TYPE_CHECKING:
    from k3conformance.endpoint.completion import Completion

Layer = Literal["parser", "api", "model", "infra"]


class ConformanceFailure(AssertionError):
    def __init__(self, layer: Layer, expected: str, got: object, hint: str = "") -> None:
        self.layer = layer
        # `expected` and `hint` may quote what came back too: escaped like the excerpt.
        message = f"[layer: {layer}] expected {terminal_safe(expected)}; got: {excerpt(got)}"
        if hint:
            message += f"\n  try: {terminal_safe(hint)}"
        super().__init__(message)


def expect(condition: bool, *, layer: Layer, expected: str, got: object, hint: str = "") -> None:
    __tracebackhide__ = True
    if not condition:
        raise ConformanceFailure(layer, expected, got, hint)


class K3ConformanceWarning(UserWarning):
    """Behaviour worth knowing about that breaks no contract (e.g. tool-call arguments that
    arrive in one delta after a long silence, as both K3 parsers do by design)."""


def check_stopped(completion: Completion, context: str) -> None:
    """finish_reason `stop`: `length` means the budget ran out (the model's verbosity), any
    other value is not what an OpenAI client expects here."""
    __tracebackhide__ = True
    expect(
        completion.finish_reason == "stop",
        layer="model" if completion.finish_reason == "length" else "api",
        expected=f"finish_reason 'stop' ({context})",
        got=completion.finish_reason,
        hint="'length' means the budget ran out; anything else is not an OpenAI finish reason",
    )
