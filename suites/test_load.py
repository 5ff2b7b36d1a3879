"""Load: the streaming tool-call checks on the same requests sent one at a time, then
`--k3-load-concurrency` (default 32) at once; a check that holds alone and breaks under load
fails here, with both rates. Then the same for strict-schema tool requests, each with a
schema of its own, and a plain request after them: a deployment that answers them one at a
time and goes down with them all in flight fails here. Logic: `k3conformance/checks/load.py`.

The tool streams are the tool_calls suite's calling items (`fixtures/tool_calls.json`); the
strict requests are cases of the tool_schemas corpus (`k3conformance/datasets/schema_corpus.py`:
the fixtures declare one strict tool, and guided decoding's load is in compiling and applying
many distinct grammars at once), their tool declared `strict: true`, streamed. The lane holds
every request slot of its process while it runs, so no other suite's request is in flight
beside it (other xdist workers' may be: run it without -n for a clean baseline, and since a
deployment that crashes under the load fails every request after it, the lane runs after
every other test of its process).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pytest

from k3conformance import Completion, Exchange, Probe, ProbeResult, RequestError, load_fixture
from k3conformance.checks import load as checks
from k3conformance.datasets.schema_corpus import ToolSchemaCase, tool_request, tool_schema_corpus

SUITE = "load"
MAX_TOKENS = 16384
AUTHORED = load_fixture("tool_calls")
TOOLS: Mapping[str, dict[str, Any]] = AUTHORED.extra["tools"]
# The tool_calls suite's items that call: each is asked to call, streamed.
CALLING = ("simple", "parallel", "edge", "named")
ITEMS: list[Mapping[str, Any]] = [item for item in AUTHORED.items if item["category"] in CALLING]
# The strict phase's schemas: the first cases of every family of the corpus, 32 distinct
# grammars, as many as the default load puts in flight.
STRICT_PER_FAMILY = 4
STRICT_CASES: list[ToolSchemaCase] = [
    case for case in tool_schema_corpus() if int(case.id.rpartition("-")[2]) < STRICT_PER_FAMILY
]
# The liveness probe after the strict load: a plain small request that any live server answers.
LIVENESS = "liveness"
LIVENESS_REQUEST: Mapping[str, Any] = {
    "messages": [{"role": "user", "content": "Reply with one word."}],
    "max_tokens": 64,
}
TOOL_STREAMS, STRICT = "", "strict-"


def _request(item: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "messages": [{"role": "user", "content": item["prompt"]}],
        "tools": [TOOLS[name] for name in item["tools"]],
        "stream": True,
    }


def _strict_request(case: ToolSchemaCase) -> dict[str, Any]:
    return tool_request(case, stream=True, strict=True)


def loaded_item(position: int) -> Mapping[str, Any]:
    """The item the loaded phase's request at `position` asks: the items in turn, again and again."""
    return ITEMS[position % len(ITEMS)]


async def _alone_then_together(exchange: Exchange, phase: str, requests: Sequence[dict[str, Any]]) -> None:
    """`requests` one at a time, then `--k3-load-concurrency` of them (in turn, again and again) at once."""
    for position, request in enumerate(requests):
        await exchange.send(f"{phase}alone-{position:03d}", request)
    concurrency = exchange.settings.load_concurrency
    await asyncio.gather(
        *(
            exchange.send(f"{phase}load-{position:03d}", requests[position % len(requests)])
            for position in range(concurrency)
        )
    )


async def _lane(exchange: Exchange) -> None:
    await _alone_then_together(exchange, TOOL_STREAMS, [_request(item) for item in ITEMS])
    # Last, since a deployment it takes down answers nothing after it.
    await _alone_then_together(exchange, STRICT, [_strict_request(case) for case in STRICT_CASES])
    await exchange.send(LIVENESS, LIVENESS_REQUEST)


LANE = Probe(
    SUITE,
    "streaming-tool-calls",
    conversation=_lane,
    samples=1,
    max_tokens=MAX_TOKENS,
    data={**AUTHORED.provenance(), "strict_schemas": [case.id for case in STRICT_CASES]},
    exclusive=True,
    judges_infra_errors=True,
)


def _steps(result: ProbeResult, phase: str, stage: str) -> Iterator[tuple[int, Completion | RequestError]]:
    """The outcomes of one stage (`alone`, `load`) of one phase, with each request's position."""
    prefix = f"{phase}{stage}-"
    for step, outcome in sorted(result.samples[0].outcomes.items()):
        if step.startswith(prefix):
            yield int(step.removeprefix(prefix)), outcome


def _phases(result: ProbeResult, check: checks.LaneCheck) -> tuple[checks.PhaseTally, checks.PhaseTally]:
    alone = [(outcome, ITEMS[position]) for position, outcome in _steps(result, TOOL_STREAMS, "alone")]
    loaded = [(outcome, loaded_item(position)) for position, outcome in _steps(result, TOOL_STREAMS, "load")]
    # Only the strict phase judges its unanswered requests; the tool streams' leave these tests unscored.
    checks.require_answered(f"{SUITE}/{result.probe.item}", [outcome for outcome, _ in (*alone, *loaded)])
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
    return alone, loaded, _load_applied(result, TOOL_STREAMS)


def _load_applied(result: ProbeResult, phase: str) -> int:
    """The load applied: every request of the phase's loaded stage was sent at once."""
    return sum(1 for _ in _steps(result, phase, "load"))


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


@lane
def test_strict_schemas_answered_under_load(probe: Probe, k3_result: ProbeResult, k3_metrics: dict[str, float]) -> None:
    alone = checks.Answering.of(outcome for _, outcome in _steps(k3_result, STRICT, "alone"))
    loaded = checks.Answering.of(outcome for _, outcome in _steps(k3_result, STRICT, "load"))
    k3_metrics.update(
        alone_requests=alone.requests,
        alone_unanswered=len(alone.unanswered),
        load_requests=loaded.requests,
        load_unanswered=len(loaded.unanswered),
    )
    checks.check_strict_schemas_answered_under_load(
        alone, loaded, k3_result.outcome(LIVENESS), _load_applied(k3_result, STRICT)
    )
