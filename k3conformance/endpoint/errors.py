"""How a request failed, and who is to blame: `infra` (transport, timeout, 429, 5xx, a
dropped stream: retried, never scored as a wrong answer) or `api` (a 4xx rejection)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any


class ErrorClass(str, Enum):
    INFRA = "infra"
    API = "api"


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

    def describe(self) -> str:
        status = f"HTTP {self.http_status} " if self.http_status else ""
        return f"{status}{self.kind}: {self.message} (after {self.attempts} attempt(s))"


class EndpointError(Exception):
    """The endpoint cannot be used; the message is meant for the person at the terminal."""
