"""Checks of the structured-output suite (`suites/test_structured_output.py`): `response_format`
with a JSON schema is honoured."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator

from k3conformance.checks.failures import check_stopped, expect
from k3conformance.endpoint.completion import Completion
from k3conformance.formatting import excerpt
from k3conformance.xtml.markup import find_markup


def check_response_format_json_schema(completion: Completion, schema: Mapping[str, Any], mode: str) -> None:
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
    # A think block or other markup left in content is the reasoning parser's leak, whatever
    # the structured-output backend did with the answer.
    leaked = find_markup(content)
    expect(
        parsed,
        layer="parser" if leaked else "api",
        expected=f"content that parses as JSON, since response_format asked for a json_schema ({mode})",
        got=f"{', '.join(leaked)} in {excerpt(content)}" if leaked else content,
        hint="markup in content: the reasoning parser left it there"
        if leaked
        else "the server may ignore response_format (no structured-output backend, or not forwarded)",
    )
    errors = [
        f"{'/'.join(map(str, error.absolute_path)) or '(root)'}: {error.message}"
        for error in Draft202012Validator(schema).iter_errors(value)
    ]
    expect(not errors, layer="api", expected=f"content valid against the schema ({mode})", got="; ".join(errors[:3]))


def check_json_schema_output_compact(completion: Completion, mode: str) -> None:
    """Vendor mode: json_schema output on one line, no newline or tab (Moonshot's API; KVV)."""
    __tracebackhide__ = True
    content = completion.content or ""
    expect(
        "\n" not in content and "\t" not in content,
        layer="api",
        expected=f"compact JSON content, with no newline or tab ({mode})",
        got=f"{content.count(chr(10))} newline(s), {content.count(chr(9))} tab(s): {excerpt(content)}",
        hint="the structured-output grammar allows any whitespace (xgrammar any_whitespace); Moonshot's API does not",
    )


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


def check_response_format_text(completion: Completion, mode: str) -> None:
    __tracebackhide__ = True
    check_text_content(completion, f"response_format text, {mode}")


def check_response_format_json_object(completion: Completion, mode: str) -> None:
    __tracebackhide__ = True
    check_json_object_content(completion, f"response_format json_object, {mode}")


def check_response_format_json_schema_non_strict(completion: Completion, mode: str) -> None:
    """json_schema with strict false guarantees valid JSON, not the schema."""
    __tracebackhide__ = True
    check_json_object_content(completion, f"response_format json_schema with strict false, {mode}")
