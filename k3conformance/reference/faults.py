"""The one place where a profile's deliberate faults change what the reference deployment emits.

Each hook receives the healthy output and returns what a faulty deployment would
send instead. Model-level faults (wrong reasoning split, looping text) belong in
`on_completion` so streaming and non-streaming stay consistent; wire-level faults
(malformed fields, dropped streams) belong in `on_message` or `on_stream`.
The healthy profile has no faults, so every hook is currently the identity.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from k3conformance.reference.simulator import Completion

KNOWN_FAULTS: frozenset[str] = frozenset()


def on_completion(faults: frozenset[str], completion: Completion) -> Completion:
    return completion


def on_message(faults: frozenset[str], message: dict[str, Any]) -> dict[str, Any]:
    return message


def on_stream(faults: frozenset[str], frames: Iterator[str]) -> Iterator[str]:
    return frames
