"""The gate's options as one type: what the fixed-size comparison (gate/verdict.py) and the sequential
plan (plan.py) read, named and defaulted as in the option table (options.GATE_OPTIONS and
options.PLAN_OPTIONS), so `pytest --k3-baseline`, `k3conformance compare` and `k3conformance plan`
cannot drift apart. Margins are in points, as the user writes them."""

from __future__ import annotations

from collections.abc import Mapping
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
    # Settings the candidate may differ from the baseline in, declared (--k3-allow-differences).
    allow_differences: tuple[str, ...] = _default("allow_differences")
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

    @property
    def mode_line(self) -> str:
        """The mode and what it does to the exit status, for the verdict line."""
        if self.gate == "warn":
            return "warn mode, opted into with --k3-gate warn: INCONCLUSIVE exits 0"
        return "strict mode: exits non-zero unless PASS"

    def policy(self) -> dict[str, Any]:
        """The policy in force, as every report prints it and gate.json stores it."""
        return {
            "mode": self.gate,
            "margin": self.margin,
            "margins": dict(self.margins),
            "alpha": self.alpha,
            "repetition_floor": self.repetition_floor,
            "truncation_floor": self.truncation_floor,
            "min_coverage": self.min_coverage,
            "allow_differences": list(self.allow_differences),
        }

    def weaker_than(self, stored: Mapping[str, Any]) -> list[str]:
        """How this policy is weaker than one stored with a baseline (`policy()`), one entry each."""
        weaker = []
        for name, bigger_is_weaker in (
            ("margin", True),
            ("alpha", True),
            ("repetition_floor", True),
            ("truncation_floor", True),
            ("min_coverage", False),
        ):
            theirs, ours = stored.get(name), getattr(self, name)
            if not isinstance(theirs, (int, float)):
                continue
            if (ours > theirs) if bigger_is_weaker else (ours < theirs):
                weaker.append(f"{name} {ours:g} (the baseline's {theirs:g})")
        if stored.get("mode") == "strict" and self.gate == "warn":
            weaker.append("warn mode (the baseline's strict)")
        return weaker

    def policy_line(self) -> str:
        margins = "".join(f", {suite} {points:g}" for suite, points in self.margins)
        return (
            f"policy: margin {self.margin:g} pts{margins}, one-sided α {self.alpha:g}, looping floor "
            f"{self.repetition_floor:.0%}, truncation floor {self.truncation_floor:.0%}, minimum coverage "
            f"{self.min_coverage:.0%}"
            + (f", differences allowed: {', '.join(self.allow_differences)}" if self.allow_differences else "")
            + f", {self.mode_line}"
        )

    def margin_of(self, suite: str) -> float:
        """The suite's margin as a share of accuracy (3 points is 0.03)."""
        return dict(self.margins).get(suite, self.margin) / 100

    def floor_of(self, rate: str) -> float:
        return self.repetition_floor if rate == "looping" else self.truncation_floor
