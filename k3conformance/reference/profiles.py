"""Named behaviours of the reference deployment: how well and how verbosely the simulator answers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from k3conformance.reference.faults import KNOWN_FAULTS


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    # Probability that a graded fixture item is answered correctly.
    accuracy: float
    # Mean reasoning length in words for each reasoning effort.
    reasoning_words: Mapping[str, int]
    latency_s: float = 0.0
    # Deliberate deployment bugs; see faults.py for where each one takes effect.
    faults: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        if not 0.0 <= self.accuracy <= 1.0:
            raise ValueError(f"profile {self.name!r}: accuracy must be in [0, 1]")
        unknown = self.faults - KNOWN_FAULTS
        if unknown:
            raise ValueError(f"profile {self.name!r}: unknown faults {sorted(unknown)}")


PROFILES: dict[str, Profile] = {
    "tp8": Profile(
        name="tp8",
        description="healthy TP8 on one 8-GPU node",
        accuracy=0.9,
        reasoning_words=MappingProxyType({"low": 60, "high": 250, "max": 600}),
    ),
}


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise KeyError(f"unknown reference profile {name!r}; known profiles: {known}") from None
