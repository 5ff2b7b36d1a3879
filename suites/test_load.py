"""Load: the streaming tool-call checks on the same requests sent one at a time, then
`--k3-load-concurrency` (default 32) at once; a check that holds alone and breaks under load
fails here, with both rates. Logic: `k3conformance/checks/load.py`.

The requests are the tool_calls suite's calling items (`fixtures/tool_calls.json`), streamed.
The lane holds every request slot of its process while it runs, so no other suite's request
is in flight beside it (other xdist workers' may be: run it without -n for a clean baseline).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from k3conformance import Exchange, Probe, ProbeResult, load_fixture
from k3conformance.checks import load as checks

SUITE = "load"
MAX_TOKENS = 16384
AUTHORED = load_fixture("tool_calls")
TOOLS: Mapping[str, dict[str, Any]] = AUTHORED.extra["tools"]
# The tool_calls suite's items that call: each is asked to call, streamed.
CALLING = ("simple", "parallel", "edge", "named")
ITEMS: list[Mapping[str, Any]] = [item for item in AUTHORED.items if item["category"] in CALLING]


def _request(item: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "content": item["prompt"]}],
        "tools": [TOOLS[name] for name in item["tools"]],
        "stream": True,
    }


def loaded_item(position: int) -> Mapping[str, Any]:
    """The item the loaded phase's request at `position` asks: the items in turn, again and again."""
    return ITEMS[position % len(ITEMS)]


async def _lane(exchange: Exchange) -> None:
    for position, item in enumerate(ITEMS):
        await exchange.send(f"alone-{position:03d}", _request(item))
    concurrency = exchange.settings.load_concurrency
    await asyncio.gather(
        *(exchange.send(f"load-{position:03d}", _request(loaded_item(position))) for position in range(concurrency))
    )


LANE = Probe(
    SUITE,
    "streaming-tool-calls",
    conversation=_lane,
    samples=1,
    max_tokens=MAX_TOKENS,
    data=AUTHORED.provenance(),
    exclusive=True,
)


def _phases(result: ProbeResult, check: checks.LaneCheck) -> tuple[checks.PhaseTally, checks.PhaseTally]:
    outcomes = result.samples[0].outcomes
    alone = [(outcomes[f"alone-{position:03d}"], item) for position, item in enumerate(ITEMS)]
    loaded = [
        (outcome, loaded_item(int(step.removeprefix("load-"))))
        for step, outcome in sorted(outcomes.items())
        if step.startswith("load-")
    ]
    return checks.tally(check, alone, TOOLS), checks.tally(check, loaded, TOOLS)


def _rates(
    name: str, result: ProbeResult, metrics: dict[str, float]
) -> tuple[checks.PhaseTally, checks.PhaseTally, int]:
    """Both phases' tallies of the named check, kept as metrics too, and the load applied."""
    alone, loaded = _phases(result, checks.STREAM_CHECKS[name])
    metrics.update(
        alone_streams=alone.streams,
        alone_failures=alone.failures,
        load_streams=loaded.streams,
        load_failures=loaded.failures,
    )
    return alone, loaded, _load_applied(result)


def _load_applied(result: ProbeResult) -> int:
    """The load applied: every stream of the loaded phase was sent at once."""
    return sum(step.startswith("load-") for step in result.samples[0].outcomes)


lane = pytest.mark.parametrize("probe", [LANE], ids=str)


@lane
def test_finish_reason_matches_tool_calls_under_load(
    probe: Probe, k3_result: ProbeResult, k3_metrics: dict[str, float]
) -> None:
    checks.check_finish_reason_matches_tool_calls_under_load(
        *_rates("finish_reason_matches_tool_calls", k3_result, k3_metrics)
    )


@lane
def test_calls_match_expected_under_load(probe: Probe, k3_result: ProbeResult, k3_metrics: dict[str, float]) -> None:
    checks.check_calls_match_expected_under_load(*_rates("calls_match_expected", k3_result, k3_metrics))


@lane
def test_parallel_calls_under_load(probe: Probe, k3_result: ProbeResult, k3_metrics: dict[str, float]) -> None:
    checks.check_parallel_calls_under_load(*_rates("parallel_calls", k3_result, k3_metrics))
