"""Checks of the API surface around the model: structured output and request validation."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator

from k3conformance.checks.failures import check_stopped, excerpt, expect
from k3conformance.endpoint.completion import Completion
from k3conformance.endpoint.errors import RequestError

Outcome = Completion | RequestError


def check_json_schema_content(completion: Completion, schema: Mapping[str, Any], mode: str) -> None:
    __tracebackhide__ = True
    check_stopped(completion, f"a response_format request, {mode}")
    content = (completion.content or "").strip()
    try:
        value = json.loads(content)
    except ValueError:
        value = None
        parsed = False
    else:
        parsed = True
    expect(
        parsed,
        layer="api",
        expected=f"content that parses as JSON, since response_format asked for a json_schema ({mode})",
        got=content,
        hint="the server may ignore response_format (no structured-output backend, or not forwarded)",
    )
    errors = [
        f"{'/'.join(map(str, error.absolute_path)) or '(root)'}: {error.message}"
        for error in Draft202012Validator(schema).iter_errors(value)
    ]
    expect(not errors, layer="api", expected=f"content valid against the schema ({mode})", got="; ".join(errors[:3]))


def check_rejected_with_400(outcome: Outcome, case: str, mode: str) -> None:
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
        layer="api",
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


def check_json_object_content(completion: Completion, context: str) -> None:
    """response_format json_object, or json_schema with strict false: content is a JSON object."""
    __tracebackhide__ = True
    check_stopped(completion, context)
    content = (completion.content or "").strip()
    try:
        value = json.loads(content)
    except ValueError:
        value = None
    expect(
        isinstance(value, dict),
        layer="api",
        expected=f"content that is one JSON object ({context})",
        got=content,
        hint="the server may ignore response_format (no structured-output backend, or not forwarded)",
    )


def check_text_content(completion: Completion, context: str) -> None:
    """response_format text (the default): a plain answer."""
    __tracebackhide__ = True
    check_stopped(completion, context)
    expect(
        bool((completion.content or "").strip()),
        layer="api",
        expected=f"a text answer ({context})",
        got=completion.content,
    )
