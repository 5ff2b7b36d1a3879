"""The gate's options as one type: what the fixed-size comparison (gate/verdict.py) and the sequential
plan (plan.py) read, named and defaulted as in the option table (options.GATE_OPTIONS and
options.PLAN_OPTIONS), so `pytest --k3-baseline`, `k3conformance compare` and `k3conformance plan`
cannot drift apart. Margins are in points, as the user writes them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from k3conformance.options import GATE_OPTIONS, PLAN_OPTIONS, option, samples_of


def _default(name: str) -> Any:
    return option(name).default


# The numeric policy, and whether a larger value makes a verdict easier to get.
_ORDERED = (
    ("margin", True),
    ("alpha", True),
    ("repetition_floor", True),
    ("truncation_floor", True),
    ("min_coverage", False),
)


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
    # The run's samples per item, and single suites' own: round 1 of a suite sampled in rounds.
    samples: int = _default("samples")
    suite_samples: tuple[tuple[str, int], ...] = _default("suite_samples")

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
            return "warn mode, opted into with --k3-gate warn: INCONCLUSIVE exits 0, INCOMPLETE and FAIL exit 1"
        return "strict mode: exits non-zero unless PASS"

    def verdict_line(self, verdict: str) -> str:
        """The mode, the exit status this verdict has under it, and any weaker policy in force."""
        if self.gate == "warn":
            status = 0 if verdict in ("PASS", "INCONCLUSIVE") else 1
            line = f"warn mode, opted into with --k3-gate warn: {verdict} exits {status}"
        else:
            line = self.mode_line
        weaker = [entry for entry, easier in self.overrides() if easier]
        return line + (f"; weaker policy: {', '.join(weaker)}" if weaker else "")

    def overrides(self) -> list[tuple[str, bool]]:
        """Each difference from the default policy (from options, ini or environment alike: they all
        arrive here), and whether it makes a verdict easier to get (a weaker policy)."""
        default = GateSettings()
        found: list[tuple[str, bool]] = []
        for name, bigger_is_weaker in _ORDERED:
            ours, theirs = getattr(self, name), getattr(default, name)
            if ours != theirs:
                found.append((f"{name} {ours:g} (default {theirs:g})", (ours > theirs) == bigger_is_weaker))
        defaults = dict(default.margins)
        for suite, points in self.margins:
            usual = defaults.get(suite, default.margin)
            if points != usual:
                found.append((f"margin of {suite} {points:g} (default {usual:g})", points > usual))
        if self.allow_differences:
            found.append((f"differences allowed: {', '.join(self.allow_differences)}", True))
        if self.gate != default.gate:
            found.append((f"{self.gate} mode (default {default.gate})", self.gate == "warn"))
        return found

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
            "overrides": [entry for entry, _ in self.overrides()],
            "weaker": [entry for entry, easier in self.overrides() if easier],
        }

    def weaker_than(self, stored: Mapping[str, Any]) -> list[str]:
        """How this policy is weaker than one stored with a baseline (`policy()`), one entry each."""
        weaker = []
        for name, bigger_is_weaker in _ORDERED:
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
            + (f"; differs from the default policy: {'; '.join(self._marked())}" if self.overrides() else "")
        )

    def _marked(self) -> list[str]:
        return [entry + (" (weaker policy)" if easier else "") for entry, easier in self.overrides()]

    def samples_of(self, suite: str) -> int:
        """The run's samples per item of `suite` (--k3-suite-samples, else --k3-samples)."""
        return samples_of(suite, self.samples, self.suite_samples)

    def margin_of(self, suite: str) -> float:
        """The suite's margin as a share of accuracy (3 points is 0.03)."""
        return dict(self.margins).get(suite, self.margin) / 100

    def floor_of(self, rate: str) -> float:
        return self.repetition_floor if rate == "looping" else self.truncation_floor
