"""Smoke: the whole path from request to run record works against the endpoint.

That the model is listed by `/v1/models` is checked before any item runs: the plugin
stops with one message when it is not.

Not a quality measurement: each prompt has one obvious answer that any working K3
deployment gives. A failure here means the serving path itself is broken, and the
other suites' numbers would mean nothing until it is fixed. Logic: `k3conformance/checks/smoke.py`.
"""

from __future__ import annotations

from typing import Any

import pytest

from k3conformance import Probe, ProbeResult, ResolvedEndpoint, load_fixture
from k3conformance.checks import smoke as checks

SUITE = "smoke"
# K3 thinks before every answer, at effort max for a while: leave it room.
MAX_TOKENS = 8192

SMOKE = load_fixture(SUITE)
ANSWERS = {item["id"]: str(item["answer"]) for item in SMOKE.items}


def _probe(item: dict[str, Any]) -> Probe:
    messages = [{"role": "user", "content": item["prompt"]}]
    return Probe(
        SUITE,
        item["id"],
        requests={"plain": {"messages": messages}, "stream": {"messages": messages, "stream": True}},
        samples=1,
        max_tokens=MAX_TOKENS,
        data=SMOKE.provenance(),
    )


PROBES = [_probe(item) for item in SMOKE.items]
probes = pytest.mark.parametrize("probe", PROBES, ids=str)


@probes
def test_chat_round_trip(probe: Probe, k3_result: ProbeResult, k3_endpoint: ResolvedEndpoint) -> None:
    checks.check_chat_round_trip(k3_result.completion("plain"), ANSWERS[probe.item], k3_endpoint.model)


@probes
def test_streaming_matches_non_streaming(probe: Probe, k3_result: ProbeResult) -> None:
    checks.check_streaming_matches_non_streaming(
        k3_result.completion("plain"), k3_result.completion("stream"), ANSWERS[probe.item]
    )


@probes
def test_usage_reported(probe: Probe, k3_result: ProbeResult) -> None:
    for step in ("plain", "stream"):
        mode = "streaming, with stream_options.include_usage" if step == "stream" else "non-streaming"
        checks.check_usage_reported(k3_result.completion(step).usage, mode)
