"""BFCL: tool calls on a 200-item subset of the Berkeley Function-Calling Leaderboard
(`fixtures/bfcl.json`, built by `fixtures/build_bfcl.py`), streamed and not, scored against its
ground truth. Logic: `k3conformance/checks/bfcl.py` and `k3conformance/scoring/call_matching.py`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from k3conformance import Probe, ProbeResult, load_fixture
from k3conformance.checks import bfcl as checks
from k3conformance.checks.tool_calls import argument_report, parsed_calls
from k3conformance.scoring.call_matching import match_ground_truth

SUITE = "bfcl"
MODES = ("plain", "stream")
MAX_TOKENS = 16384
BFCL = load_fixture("bfcl")
ITEMS = {item["id"]: item for item in BFCL.items}


def _probe(item: Mapping[str, Any]) -> Probe:
    requests = {
        mode: {
            "messages": [{"role": "user", "content": item["prompt"]}],
            "tools": item["tools"],
            "stream": mode == "stream",
        }
        for mode in MODES
    }
    # BFCL's ids name its category (simple_3, parallel_multiple_18, irrelevance_7): a limited run keeps each.
    kind = item["id"].rstrip("0123456789").rstrip("_")
    return Probe(
        SUITE, item["id"], requests=requests, samples=1, max_tokens=MAX_TOKENS, kind=kind, data=BFCL.provenance()
    )


PROBES = [_probe(item) for item in BFCL.items]


@pytest.mark.parametrize("probe", PROBES, ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_calls_match_ground_truth(
    probe: Probe, mode: str, k3_result: ProbeResult, k3_metrics: dict[str, float]
) -> None:
    item = ITEMS[probe.item]
    completion = k3_result.completion(mode)
    expected_call = bool(item["ground_truth"])
    made_call = bool(completion.tool_calls)
    key = {(True, True): "trigger_tp", (False, True): "trigger_fp", (True, False): "trigger_fn"}.get(
        (expected_call, made_call)
    )
    if key:
        k3_metrics[key] = 1
    report = argument_report(completion, {tool["function"]["name"]: tool for tool in item["tools"]})
    k3_metrics.update(calls=report.calls, valid_calls=report.valid)
    result = match_ground_truth(item["ground_truth"], parsed_calls(completion)) if expected_call else None
    checks.check_calls_match_ground_truth(
        completion, result, json.dumps(item["ground_truth"], ensure_ascii=False), mode
    )
