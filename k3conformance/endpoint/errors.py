"""How a request failed, and who is to blame: `infra` (transport, timeout, 429, 5xx, a
dropped stream: retried, never scored as a wrong answer), `api` (a 4xx rejection) or
`parser` (the server's own output parser refused what the model wrote).

The `parser` class is llama.cpp's: when its chat layer cannot read what the model wrote, its
server answers HTTP 500 (in a stream: an error event), in one of two wordings:
- "The model produced output that does not match the expected peg-native format": the
  parser refuses this answer (a tool call it does not accept, text after a closed message);
- "Failed to parse tool call arguments as JSON: ...": a request's history holds a tool call
  whose arguments are not JSON. An agent sends back the calls the model made, as the server
  returned them; after one such call (its parser passes the model's broken arguments
  through), llama.cpp refuses every later turn of the conversation (measured on xllamacpp
  2026.10.11549: a 500 before any decoding). vLLM and SGLang take the same history.
Both are retried like any 5xx, since sampling may write something else; if one persists, it
is a fault of the server's handling of the model's output that an agent would hit,
deterministic for that output, not an outage: the checks fail it with the `parser` layer.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any, Literal


class ErrorClass(str, Enum):
    INFRA = "infra"
    API = "api"
    PARSER = "parser"


# llama.cpp's words (its server in xllamacpp 2026.10.11549; tests/unit/endpoint/test_parser_refusals.py
# finds them in its library) when it cannot read the model's output: the format named is the
# parser's kind ("peg-native" for the Kimi K3 handler).
_PARSER_REFUSAL = re.compile(
    r"model produced output that does not match the expected [\w-]+ format"
    r"|Failed to parse tool call arguments as JSON"
)


def is_parser_refusal(message: str) -> bool:
    """Whether a server error's message is its output parser refusing the model's output."""
    return _PARSER_REFUSAL.search(message) is not None


@dataclass
class RequestError:
    error_class: ErrorClass
    kind: str
    message: str
    attempts: int
    http_status: int | None = None
    body: str | None = None

    def to_record(self) -> dict[str, Any]:
        data = asdict(self)
        data["error_class"] = self.error_class.value
        return data

    @classmethod
    def from_record(cls, data: dict[str, Any]) -> RequestError:
        return cls(**{**data, "error_class": ErrorClass(data["error_class"])})

    @property
    def layer(self) -> Literal["parser", "api"]:
        """The layer a check that reads this error as a result blames: the parser when the
        server's parser refused the output, otherwise the API (a 4xx, or a 5xx where the
        suite takes status errors as results)."""
        return "parser" if self.error_class is ErrorClass.PARSER else "api"

    def describe(self) -> str:
        status = f"HTTP {self.http_status} " if self.http_status else ""
        return f"{status}{self.kind}: {self.message} (after {self.attempts} attempt(s))"


class EndpointError(Exception):
    """The endpoint cannot be used; the message is meant for the person at the terminal."""
