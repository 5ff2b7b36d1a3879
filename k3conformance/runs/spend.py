"""What a stored run spent, counted from its response records: requests sent and output tokens
generated, per suite. The measure of what the sequential gate saves: a sequential and a
fixed-size run of the same candidate, counted the same way (not estimated, not timed)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from k3conformance.runs.records import iter_records


@dataclass
class Spend:
    requests: int = 0
    output_tokens: int = 0

    def add(self, other: Spend) -> None:
        self.requests += other.requests
        self.output_tokens += other.output_tokens


def spend_by_suite(run_dir: Path) -> dict[str, Spend]:
    """Every response record counts as a request (an error answer used a request slot too)."""
    spent: dict[str, Spend] = {}
    for record in iter_records(run_dir, "response"):
        usage = (record.get("response") or {}).get("usage") or {}
        spend = spent.setdefault(record["suite"], Spend())
        spend.requests += 1
        spend.output_tokens += int(usage.get("completion_tokens") or 0)
    return spent


def total(spent: dict[str, Spend]) -> Spend:
    whole = Spend()
    for spend in spent.values():
        whole.add(spend)
    return whole
