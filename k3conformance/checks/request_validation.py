"""Checks of the request-validation suite (`suites/test_request_validation.py`): invalid requests
get HTTP 400 with an error body, not 500, not 200."""

from __future__ import annotations

from k3conformance.checks.failures import expect
from k3conformance.endpoint.completion import Completion
from k3conformance.endpoint.errors import RequestError
from k3conformance.formatting import excerpt

Outcome = Completion | RequestError


def check_invalid_request_rejected(outcome: Outcome, case: str, mode: str) -> None:
    __tracebackhide__ = True
    if isinstance(outcome, Completion):
        expect(
            False,
            layer="api",
            expected=f"HTTP 400 for {case} ({mode})",
            got=f"HTTP 200 with finish_reason {outcome.finish_reason!r}, content {excerpt(outcome.content)}",
            hint="the server accepted an invalid request; clients get no signal that it was wrong",
        )
        return
    expect(
        outcome.http_status == 400,
        layer="api",
        expected=f"HTTP 400 for {case} ({mode})",
        got=outcome.describe(),
        hint="a 5xx for a client mistake is retried by clients and looks like an outage",
    )
    expect(
        bool(outcome.body) and bool(outcome.message),
        layer="api",
        expected=f"an error body saying what is wrong with {case} ({mode})",
        got=outcome.body,
    )
