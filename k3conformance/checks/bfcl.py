"""Checks of the BFCL suite (`suites/test_bfcl.py`): calls on a subset of the Berkeley
Function-Calling Leaderboard match its ground truth, or no call where none fits."""

from __future__ import annotations

from k3conformance.checks.failures import expect
from k3conformance.checks.tool_calls import blame, check_no_calls
from k3conformance.endpoint.completion import Completion
from k3conformance.scoring.call_matching import MatchResult


def check_calls_match_ground_truth(
    completion: Completion, result: MatchResult | None, ground_truth: str, mode: str
) -> None:
    """With no ground truth (`result` None) no call may be made; otherwise the calls match it."""
    __tracebackhide__ = True
    if result is None:
        check_no_calls(completion, "a question none of the declared functions can answer", mode)
        return
    expect(
        result.ok,
        layer=blame(completion, "model"),
        expected=f"calls matching BFCL's answer {ground_truth} ({mode})",
        got=result.reason,
    )
