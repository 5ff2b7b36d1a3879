"""The gate's options as one type: what the fixed-size comparison (gate/verdict.py) and the sequential
plan (plan.py) read, named and defaulted as in the option table (options.GATE_OPTIONS and
options.PLAN_OPTIONS), so `pytest --k3-baseline`, `k3conformance compare` and `k3conformance plan`
cannot drift apart. Margins are in points, as the user writes them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from k3conformance.options import GATE_OPTIONS, PLAN_OPTIONS, option


def _default(name: str) -> Any:
    return option(name).default


@dataclass(frozen=True)
class GateSettings:
    gate: str = _default("gate")
    alpha: float = _default("alpha")
    margin: float = _default("margin")
    margins: tuple[tuple[str, float], ...] = _default("margins")
    repetition_floor: float = _default("repetition_floor")
    truncation_floor: float = _default("truncation_floor")
    min_coverage: float = _default("min_coverage")
    # The sequential plan's: looks per suite, the most items per suite, and the candidate samples
    # per item it weighs for a suite with fewer items than it needs.
    looks: int = _default("looks")
    max_items: int | None = _default("max_items")
    sample_rounds: tuple[int, ...] = _default("sample_rounds")
    # The run's samples per item: round 1 of a suite sampled in rounds.
    samples: int = _default("samples")

    @classmethod
    def from_options(cls, options: object) -> GateSettings:
        """From anything that carries the options by name: the plugin's Settings, or the parsed
        arguments of `k3conformance compare` (the gate's only) and `plan` (the gate's and the plan's).
        An option the carrier lacks keeps the table's default."""
        names = (*GATE_OPTIONS, *PLAN_OPTIONS)
        return cls(**{name: getattr(options, name) for name in names if hasattr(options, name)})

    @property
    def mode(self) -> str:
        return self.gate

    def margin_of(self, suite: str) -> float:
        """The suite's margin as a share of accuracy (3 points is 0.03)."""
        return dict(self.margins).get(suite, self.margin) / 100

    def floor_of(self, rate: str) -> float:
        return self.repetition_floor if rate == "looping" else self.truncation_floor
