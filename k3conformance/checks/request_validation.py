"""Checks of the request-validation suite (`suites/test_request_validation.py`): invalid requests
get HTTP 400 with an error body, not 500, not 200."""

from __future__ import annotations

from k3conformance.checks.failures import check_stopped, expect
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


def check_accepted_text_answer(outcome: Outcome, case: str, mode: str) -> None:
    """A valid request that looks unusual is answered: HTTP 200, a text answer, no tool calls."""
    __tracebackhide__ = True
    expect(
        isinstance(outcome, Completion),
        # A valid request whose answer the server's own parser refused fails at the parser.
        layer=outcome.layer if isinstance(outcome, RequestError) else "api",
        expected=f"HTTP 200 for {case}, a valid request ({mode})",
        got=outcome.describe() if isinstance(outcome, RequestError) else outcome,
        hint="a valid request must be answered (tool_choice 'auto' and 'none' need no tools, for instance)",
    )
    assert isinstance(outcome, Completion)
    expect(
        not outcome.tool_calls and bool((outcome.content or "").strip()),
        layer="api",
        expected=f"a text answer without tool calls for {case} ({mode})",
        got=f"content {excerpt(outcome.content)}, tool_calls {outcome.tool_calls}",
    )
    check_stopped(outcome, f"{case}, {mode}")


def check_malformed_dynamic_tools_rejected(outcome: Outcome, case: str, mode: str) -> None:
    __tracebackhide__ = True
    check_invalid_request_rejected(outcome, case, mode)


def check_malformed_response_format_rejected(outcome: Outcome, case: str, mode: str) -> None:
    __tracebackhide__ = True
    check_invalid_request_rejected(outcome, case, mode)


def check_tool_choice_without_tools_accepted(outcome: Outcome, case: str, mode: str) -> None:
    __tracebackhide__ = True
    check_accepted_text_answer(outcome, case, mode)


def check_locked_sampling_parameters_rejected(outcome: Outcome, case: str, mode: str) -> None:
    """Vendor mode: Moonshot's API fixes these sampling parameters; other values get a 400."""
    __tracebackhide__ = True
    check_invalid_request_rejected(outcome, case, mode)


def same_sample(first: Completion, second: Completion) -> bool:
    """Whether two answers are the same sample: same reasoning, content and calls."""
    return (first.reasoning, first.content, first.tool_calls) == (second.reasoning, second.content, second.tool_calls)


def check_omitted_sampling_parameters_default_to_k3(
    explicit: Completion, omitted: Completion, defaults: str, case: str
) -> None:
    """Vendor mode: a request that leaves the locked parameters out is sampled with K3's
    defaults, so with one seed it draws the sample that giving those defaults draws (the
    caller has shown that the server repeats a seeded sample)."""
    __tracebackhide__ = True
    expect(
        same_sample(explicit, omitted),
        layer="api",
        expected=f"the seeded sample drawn with K3's defaults given ({defaults}) when they are left out ({case})",
        got=f"given: {excerpt(explicit.reasoning or explicit.content)}; left out: {excerpt(omitted.reasoning or omitted.content)}",
        hint="the server fills omitted sampling parameters with other defaults (its own generation config, e.g. SGLang --sampling-defaults openai or vLLM --generation-config vllm)",
    )
