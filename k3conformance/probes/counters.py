"""Request counts of one process, merged across xdist workers by the controller."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass
class RequestCounters:
    sent: int = 0
    attempts: int = 0
    resumed: int = 0
    infra_errors: int = 0
    api_errors: int = 0
    # Answers the server's own parser refused (endpoint/errors.py); not among the 4xx rejections.
    parser_refusals: int = 0

    def count_failure(self, error_class: str) -> None:
        """One request answered with no completion, counted by who is to blame (endpoint/errors.ErrorClass)."""
        if error_class == "infra":
            self.infra_errors += 1
        elif error_class == "parser":
            self.parser_refusals += 1
        else:
            self.api_errors += 1

    def merge(self, other: Mapping[str, int]) -> None:
        for name, value in other.items():
            setattr(self, name, getattr(self, name) + int(value))
