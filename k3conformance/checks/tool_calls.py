"""Checks of tool calls as `--tool-call-parser kimi_k3` and the server hand them to agents.

K3 writes calls in its XTML block; the parser turns them into `tool_calls`. The known
failures: `finish_reason: "tool_calls"` with `tool_calls: []` and the markup in content
(Kimi-K2 issue 26), numbers turned into strings, undeclared names passed through (vLLM PR
36891), ids that repeat, `tool_choice` ignored (vLLM PR 43155, SGLang 39895), markup in
content when no tools were declared (SGLang 39583), calls streamed in pieces.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from k3conformance.checks.failures import K3ConformanceWarning, Layer, expect
from k3conformance.endpoint.completion import Completion
from k3conformance.endpoint.errors import RequestError
from k3conformance.formatting import excerpt
from k3conformance.scoring.call_matching import Call, expected_calls_match, parse_arguments, schema_errors
from k3conformance.stats.exact import binomial_p_at_least
from k3conformance.xtml.markup import find_markup

# Tool-call arguments that arrive whole after this long a silence earn a warning: both K3
# parsers emit a call once its block closes (vLLM issue 50604), which agents must tolerate.
LATE_ARGUMENTS_SILENCE_S = 5.0
# Irrelevance: a deployment that calls a tool on a chit-chat prompt in 3 or more of 4
# samples is failed; an exact binomial test rejects a 20% false-call rate at p = 0.027.
IRRELEVANCE_SAMPLES = 4
IRRELEVANCE_MAX_CALLING = 2
IRRELEVANCE_TOLERATED_RATE = 0.2


def calls_of(completion: Completion) -> list[dict[str, Any]]:
    return list(completion.tool_calls or [])


def lost_by_parser(completion: Completion) -> bool:
    """No calls reached `tool_calls`, yet the model made some: the finish reason says so, or
    the call markup sits in content; or a call's arguments are not JSON, which the parser
    writes, not the model (K3 writes arguments in XTML). Then the parser is to blame."""
    if completion.tool_calls:
        return any(parse_arguments(call["function"].get("arguments"))[0] is None for call in calls_of(completion))
    return completion.finish_reason == "tool_calls" or bool(find_markup(completion.content))


def blame(completion: Completion, otherwise: Layer) -> Layer:
    return "parser" if lost_by_parser(completion) else otherwise


def parsed_calls(completion: Completion) -> list[Call]:
    """(name, arguments) of each call whose arguments parse; the others as empty dicts."""
    parsed: list[Call] = []
    for call in calls_of(completion):
        arguments, _ = parse_arguments(call["function"].get("arguments"))
        parsed.append((str(call["function"].get("name")), arguments or {}))
    return parsed


def check_finish_reason_matches_tool_calls(completion: Completion, mode: str) -> None:
    __tracebackhide__ = True
    calls = completion.tool_calls
    expect(
        not (completion.finish_reason == "tool_calls" and not calls),
        layer="parser",
        expected=f"a non-empty tool_calls list with finish_reason 'tool_calls' ({mode})",
        got=f"tool_calls {calls!r}, content {excerpt(completion.content)}",
        hint="Kimi-K2 issue 26: the parser found the call block but returned it as content",
    )
    expect(
        not (calls and completion.finish_reason != "tool_calls"),
        layer="parser",
        expected=f"finish_reason 'tool_calls' when tool_calls is non-empty ({mode})",
        got=f"finish_reason {completion.finish_reason!r} with {len(calls or [])} call(s)",
    )


@dataclass
class ArgumentReport:
    calls: int
    valid: int
    problems: list[str]
    # Numbers sent as strings, unknown names, unparsable JSON: the parser's doing.
    parser_fault: bool


def argument_report(completion: Completion, tools: Mapping[str, Mapping[str, Any]]) -> ArgumentReport:
    """Whether every call names a declared tool with arguments that parse and fit its
    schema; the counts feed the suite's schema accuracy."""
    calls = calls_of(completion)
    report = ArgumentReport(len(calls), 0, [], False)
    for call in calls:
        name = call["function"].get("name")
        if name not in tools:
            report.problems.append(f"{name!r} is not a declared tool (declared: {', '.join(tools)})")
            report.parser_fault = True
            continue
        arguments, error = parse_arguments(call["function"].get("arguments"))
        if arguments is None:
            report.problems.append(f"{name}: {error}: {excerpt(call['function'].get('arguments'))}")
            report.parser_fault = True
            continue
        errors = schema_errors(tools[name]["function"].get("parameters", {}), arguments)
        if errors:
            report.problems.append(f"{name}: {'; '.join(errors[:3])}")
            report.parser_fault = report.parser_fault or _has_stringified_values(arguments)
            continue
        report.valid += 1
    return report


def check_arguments_match_schema(report: ArgumentReport, mode: str) -> None:
    __tracebackhide__ = True
    expect(
        not report.problems,
        layer="parser" if report.parser_fault else "model",
        expected=f"calls to declared tools with arguments valid against their schemas ({mode})",
        got=" | ".join(report.problems),
        hint="numbers sent as strings point at the parser's argument typing; unknown names need a structural tag",
    )


def _has_stringified_values(arguments: Mapping[str, Any]) -> bool:
    for value in arguments.values():
        if isinstance(value, str):
            try:
                decoded = json.loads(value)
            except ValueError:
                continue
            if not isinstance(decoded, str):
                return True
    return False


def check_calls_match_expected(completion: Completion, expected: Sequence[Mapping[str, Any]], mode: str) -> None:
    __tracebackhide__ = True
    result = expected_calls_match(expected, parsed_calls(completion))
    cut = cut_at_marker_start(expected, parsed_calls(completion))
    expect(
        result.ok,
        layer="parser" if cut else blame(completion, "model"),
        expected=f"the calls {json.dumps(list(expected), ensure_ascii=False)} ({mode})",
        got=f"{result.reason}; calls {json.dumps(parsed_calls(completion), ensure_ascii=False)}{_unparsed(completion)}",
        hint="a string argument ends just before a `<|`: the tool-call parser took it for a closing marker"
        if cut
        else "",
    )


def cut_at_marker_start(expected: Sequence[Mapping[str, Any]], calls: Sequence[Call]) -> bool:
    """Whether some string argument arrived as exactly its expected value cut before its first
    `<|`: a naive parser's signature (a model does not stop writing a value there)."""
    received = {(name, key): value for name, arguments in calls for key, value in arguments.items()}
    return any(
        isinstance(value, str) and "<|" in value and received.get((call["name"], key)) == value.partition("<|")[0]
        for call in expected
        for key, value in call["arguments"].items()
    )


def _unparsed(completion: Completion) -> str:
    """The raw arguments that did not parse (read as {} above), so the message shows them."""
    raw = [
        str(call["function"].get("arguments"))
        for call in calls_of(completion)
        if parse_arguments(call["function"].get("arguments"))[0] is None
    ]
    return f"; arguments that are not JSON: {' | '.join(excerpt(text) for text in raw)}" if raw else ""


def check_tool_call_ids(completion: Completion, mode: str) -> None:
    __tracebackhide__ = True
    ids = [call.get("id") for call in calls_of(completion)]
    expect(
        all(isinstance(call_id, str) and call_id for call_id in ids) and len(set(ids)) == len(ids),
        layer="parser",
        expected=f"a present, unique id on every tool call ({mode})",
        got=ids,
    )


def check_round_trip_progress(turns: Sequence[Completion], mode: str) -> None:
    """Turn 1 (`auto`) and turn 2 (`required`) must call a tool, or the round trip stops."""
    __tracebackhide__ = True
    for turn, completion in enumerate(turns[:2], start=1):
        expect(
            bool(completion.tool_calls),
            layer="parser" if completion.finish_reason == "tool_calls" else ("model" if turn == 1 else "api"),
            expected=f"tool calls in turn {turn} of the round trip ({'auto' if turn == 1 else 'required'}; {mode})",
            got=f"finish_reason {completion.finish_reason!r}, tool_calls {completion.tool_calls!r}, content {excerpt(completion.content)}",
        )


def check_ids_unique_across_turns(turns: Sequence[Completion], mode: str) -> None:
    __tracebackhide__ = True
    ids = [call.get("id") for turn in turns for call in calls_of(turn)]
    expect(
        len(set(ids)) == len(ids),
        layer="parser",
        expected=f"tool-call ids unique across the turns of a conversation ({mode})",
        got=ids,
        hint="an agent maps tool results back by id: a repeated id sends a result to the wrong call",
    )


def check_parallel_calls(completion: Completion, expected: Sequence[Mapping[str, Any]], mode: str) -> None:
    __tracebackhide__ = True
    calls = calls_of(completion)
    expect(
        len(calls) == len(expected),
        layer=blame(completion, "model") if not calls else "parser",
        expected=f"{len(expected)} parallel calls ({mode})",
        got=f"{len(calls)}: {excerpt(json.dumps(calls, ensure_ascii=False), 300)}",
        hint="streamed calls that share one index are merged by every client",
    )
    if completion.stream is not None:
        indices = sorted(completion.stream.tool_calls)
        expect(
            len(indices) == len(expected),
            layer="parser",
            expected=f"{len(expected)} distinct tool-call indices in the stream",
            got=indices,
        )
    check_tool_call_ids(completion, mode)


def check_streaming_matches_non_streaming(plain: Completion, streamed: Completion) -> None:
    __tracebackhide__ = True
    stats = streamed.stream
    assert stats is not None

    def canonical(completion: Completion) -> list[str]:
        return sorted(json.dumps([name, arguments], sort_keys=True) for name, arguments in parsed_calls(completion))

    expect(
        canonical(plain) == canonical(streamed),
        layer="parser",
        expected="the same tool calls (names, arguments as parsed JSON) streamed and not",
        got=f"non-streaming {canonical(plain)}, streaming {canonical(streamed)}",
    )
    for index, seen in sorted(stats.tool_calls.items()):
        expect(
            seen.name_frames == 1 and seen.id_frames == 1,
            layer="parser",
            expected=f"call {index}'s name and id each sent once in the stream",
            got=f"name on {seen.name_frames} frames, id on {seen.id_frames} frames",
        )
        if seen.argument_frames <= 1 and seen.silence_before_s >= LATE_ARGUMENTS_SILENCE_S:
            warnings.warn(
                K3ConformanceWarning(
                    f"tool call {index}'s arguments arrived in one delta after {seen.silence_before_s:.1f} s of "
                    "silence (K3 parsers emit a call once its block closes); agents must not time out on it"
                ),
                stacklevel=2,
            )
    expect(stats.finish_frames == 1, layer="api", expected="exactly one finish frame", got=stats.finish_frames)


def check_no_calls(completion: Completion, why: str, mode: str) -> None:
    __tracebackhide__ = True
    expect(
        not completion.tool_calls and completion.finish_reason != "tool_calls",
        layer="api",
        expected=f"no tool calls with {why} ({mode})",
        got=f"finish_reason {completion.finish_reason!r}, calls {excerpt(json.dumps(calls_of(completion)), 300)}",
    )


def check_tool_choice_none(completion: Completion, mode: str) -> None:
    __tracebackhide__ = True
    check_no_calls(completion, "tool_choice 'none'", mode)


def check_tool_choice_required(completion: Completion, mode: str) -> None:
    __tracebackhide__ = True
    check_some_call(completion, "tool_choice 'required'", mode)


def check_some_call(completion: Completion, why: str, mode: str) -> None:
    __tracebackhide__ = True
    expect(
        bool(completion.tool_calls),
        layer=blame(completion, "api"),
        expected=f"at least one tool call with {why} ({mode})",
        got=f"finish_reason {completion.finish_reason!r}, content {excerpt(completion.content)}",
        hint="SGLang 39895 / vLLM PR 43155: tool_choice not enforced",
    )


def check_tool_choice_named(outcome: Completion | RequestError, name: str, mode: str) -> None:
    """Exactly the named function, or a clean 400 — never the choice silently ignored."""
    __tracebackhide__ = True
    if isinstance(outcome, RequestError):
        expect(
            outcome.http_status == 400,
            # A refusal of the server's own parser is not the API ignoring the choice.
            layer=outcome.layer,
            expected=f"calls to {name!r} or a clean HTTP 400 ({mode})",
            got=outcome.describe(),
        )
        return
    names = [call["function"].get("name") for call in calls_of(outcome)]
    expect(
        bool(names) and all(called == name for called in names),
        layer=blame(outcome, "api"),
        expected=f"only calls to the named tool {name!r} ({mode})",
        got=f"finish_reason {outcome.finish_reason!r}, calls {names}",
        hint="vLLM's K3 parser needs a structural tag for named tool_choice",
    )


def check_irrelevant_prompt_makes_no_call(samples: Sequence[Completion], mode: str) -> None:
    __tracebackhide__ = True
    calling = sum(bool(completion.tool_calls) for completion in samples)
    p_value = binomial_p_at_least(calling, len(samples), IRRELEVANCE_TOLERATED_RATE)
    expect(
        calling <= IRRELEVANCE_MAX_CALLING,
        layer="model",
        expected=(
            f"no tool call on a chit-chat prompt with unrelated tools in most samples ({mode}; fails at "
            f"{IRRELEVANCE_MAX_CALLING + 1} of {len(samples)}, a binomial test against a "
            f"{IRRELEVANCE_TOLERATED_RATE:.0%} false-call rate)"
        ),
        got=f"{calling} of {len(samples)} samples called a tool (p = {p_value:.3f})",
    )


def check_no_tool_markup_in_content(completion: Completion, context: str) -> None:
    __tracebackhide__ = True
    found = find_markup(completion.content)
    expect(
        not found,
        layer="parser",
        expected=f"no tool-call markup in content ({context})",
        got=f"{', '.join(found)} in {excerpt(completion.content)}",
        hint="SGLang 39583: with no tools declared the parser passes the call block through as text",
    )


def check_answer_uses_result(completion: Completion, needle: str, mode: str) -> None:
    __tracebackhide__ = True
    expect(
        needle.lower() in (completion.content or "").lower(),
        layer="model",
        expected=f"a final answer that uses the tool result ({needle!r}) ({mode})",
        got=completion.content,
    )


def check_round_trip_uses_tool_result(turns: Sequence[Completion], answer_contains: str, mode: str) -> None:
    """Calls in turns 1 and 2, ids unique across turns, and a clean final answer that uses the result."""
    __tracebackhide__ = True
    check_round_trip_progress(turns, mode)
    check_ids_unique_across_turns(turns, mode)
    check_no_tool_markup_in_content(turns[2], f"after a tool round trip, {mode}")
    check_answer_uses_result(turns[2], answer_contains, mode)


def check_dynamic_tools_called(completion: Completion, tool: Mapping[str, Any], context: str) -> None:
    """tool_choice required, and the only fitting tool declared inside a system message: it is
    called, with arguments valid against the schema it was declared with there."""
    __tracebackhide__ = True
    name = tool["function"]["name"]
    called = [call["function"]["name"] for call in completion.tool_calls or ()]
    expect(
        name in called,
        layer="api",
        expected=f"a call to {name!r}, declared in a system message's tools ({context})",
        got=f"calls {called}, content {excerpt(completion.content)}",
        hint="the server must read messages[].tools (a K3 API feature) and add them to the request's tools",
    )
    # Only the calls to this tool: where several tools are declared, calling another one too is allowed.
    own = [call for call in calls_of(completion) if call["function"]["name"] == name]
    check_arguments_match_schema(argument_report(replace(completion, tool_calls=own), {name: tool}), context)


def check_history_from_other_clients(completion: Completion, answer_contains: str, mode: str) -> None:
    """A history with other clients' id formats and empty or list content is answered from its tool results."""
    __tracebackhide__ = True
    check_answer_uses_result(completion, answer_contains, f"a history written by other clients, {mode}")
