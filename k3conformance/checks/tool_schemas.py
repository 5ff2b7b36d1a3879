"""Tool calls against many parameter schemas: with `tool_choice: "required"` and one
declared tool, the call's arguments must validate against the tool's JSON schema
(Draft 2020-12, formats asserted), streamed and not.

What Moonshot's Kimi-Vendor-Verifier checks with its tests/tool_call_json_schema suite,
on a corpus of our own (`k3conformance/datasets/schema_corpus.py`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from jsonschema import Draft202012Validator

from k3conformance.checks.failures import expect
from k3conformance.endpoint.completion import Completion
from k3conformance.formatting import excerpt


def check_tool_call_arguments_match_schema(
    completion: Completion, tool: str, schema: Mapping[str, Any], mode: str
) -> None:
    __tracebackhide__ = True
    calls = [call for call in completion.tool_calls or () if call["function"]["name"] == tool]
    expect(
        bool(calls),
        layer="api",
        expected=f"a call to {tool!r} under tool_choice 'required' ({mode})",
        got=f"finish_reason {completion.finish_reason!r}, calls {completion.tool_calls}, content {excerpt(completion.content)}",
        hint="a schema the server's grammar backend cannot compile may turn the forced call off",
    )
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    for call in calls:
        text = call["function"]["arguments"]
        try:
            arguments = json.loads(text)
        except ValueError:
            expect(False, layer="parser", expected=f"arguments that parse as JSON ({mode})", got=text)
        errors = [
            f"{'/'.join(map(str, error.absolute_path)) or '(root)'}: {error.message}"
            for error in validator.iter_errors(arguments)
        ]
        expect(
            not errors,
            layer="model",
            expected=f"arguments valid against the tool's schema (Draft 2020-12, {mode})",
            got=f"{'; '.join(errors[:3])} in {text}",
            hint="constrained decoding (a structural tag / JSON-schema grammar) keeps arguments within the schema",
        )
