"""Conformance inside the agent loop: every turn's tool calls go through the tool-call
checks (`checks/tool_calls.py`), so a parser bug met while the agent works shows as that
parser bug, with its layer and message, and not only as a lower score."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from k3conformance.checks import tool_calls
from k3conformance.endpoint.completion import Completion


def check_tool_calls_conform(turns: Sequence[Completion], declared: Mapping[str, Mapping[str, Any]]) -> None:
    """Per turn: finish reason agrees with the calls, calls name declared tools with valid
    arguments, ids present and unique, no call markup in content; across turns: ids unique."""
    __tracebackhide__ = True
    for number, completion in enumerate(turns, start=1):
        context = f"agent turn {number}, stream"
        tool_calls.check_finish_reason_matches_tool_calls(completion, context)
        tool_calls.check_arguments_match_schema(tool_calls.argument_report(completion, declared), context)
        tool_calls.check_tool_call_ids(completion, context)
        tool_calls.check_no_tool_markup_in_content(completion, context)
    tool_calls.check_ids_unique_across_turns(turns, "agent loop")
