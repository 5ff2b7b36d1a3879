"""What the plugin learned about the endpoint before the first item ran."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ResolvedEndpoint:
    base_url: str
    display_url: str
    model: str
    served_models: list[str]
    server_info: dict[str, Any] = field(default_factory=dict)
    simulator: bool = False
    reference_profile: str | None = None

    def to_wire(self) -> dict[str, Any]:
        return {
            "base_url": self.base_url,
            "display_url": self.display_url,
            "model": self.model,
            "served_models": self.served_models,
            "server_info": self.server_info,
            "simulator": self.simulator,
            "reference_profile": self.reference_profile,
        }

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> ResolvedEndpoint:
        return cls(**data)
