"""K3's API contract as one table, and the checks generated from it (docs/api-contract.md).

The contract holds for every combination of six request settings (`DIMENSIONS`): how the
response is streamed, how the model thinks, which tools it may call, how the turn ends, what
history precedes it, and how many requests are in flight. `EXCLUDED` names the combinations
that cannot exist, each by a rule; the suite (suites/test_contract.py) sends a pairwise
covering design of the rest (`design`). Each row of `CLAUSES` says what every response must
obey, where it applies, and which layer is at fault when it does not; `check_<clause>` judges
one cell's responses against its row, and a violation names the cell (its settings) and the clause.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from k3conformance.checks.failures import Layer, expect
from k3conformance.checks.reasoning import min_tokens
from k3conformance.endpoint.completion import FINISH_REASONS, Completion
from k3conformance.formatting import excerpt
from k3conformance.stats.covering import pairwise
from k3conformance.xtml.markup import find_markup

# --- the dimensions and the impossible combinations -------------------------------------

DIMENSIONS: Mapping[str, tuple[str, ...]] = {
    "stream": ("off", "on"),
    # An effort each, or thinking off (the K3 template allows it).
    "thinking": ("low", "high", "max", "off"),
    "tools": ("none-offered", "auto", "required", "named", "none-with-tools"),
    "ending": ("stop", "length-reasoning", "length-answer", "length-tool-args", "stop-sequence"),
    "history": ("first", "after-tool-result", "after-reasoning"),
    "load": ("alone", "many"),
}
FORCED_CALL = ("required", "named")
NO_CALL = ("none-offered", "none-with-tools")
ANSWER_ENDINGS = ("length-answer", "stop-sequence")
LENGTH_ENDINGS = ("length-reasoning", "length-answer", "length-tool-args")


def calls_tool(cell: Mapping[str, str]) -> bool:
    """Whether the turn calls a tool: forced, or `auto` with a prompt that asks for one (the
    suite's prompt does) before the tool has answered; after a tool result `auto` answers."""
    return cell["tools"] in FORCED_CALL or (cell["tools"] == "auto" and cell["history"] != "after-tool-result")


# (rule, predicate): a combination the predicate holds for is impossible and never sent.
EXCLUDED: tuple[tuple[str, Callable[[Mapping[str, str]], bool]], ...] = (
    (
        "max_tokens cannot run out inside the reasoning when thinking is off",
        lambda cell: cell["ending"] == "length-reasoning" and cell["thinking"] == "off",
    ),
    (
        "an ending inside the answer, or a stop sequence taken from it, needs a turn that answers rather than calls",
        lambda cell: cell["ending"] in ANSWER_ENDINGS and calls_tool(cell),
    ),
    (
        "an ending inside a tool call's arguments needs a turn that calls",
        lambda cell: cell["ending"] == "length-tool-args" and not calls_tool(cell),
    ),
)


def allowed(cell: Mapping[str, str]) -> bool:
    return not any(rule(cell) for _, rule in EXCLUDED)


def cell_id(cell: Mapping[str, str]) -> str:
    """A cell named by its settings, in the dimensions' order."""
    return ",".join(f"{name}={cell[name]}" for name in DIMENSIONS)


# Full over these dimensions, pairwise over the rest: every cell of the pairwise design is sent
# in each of their levels. Streaming is where most parser bugs live, and a second stream
# mode doubles a cheap design.
FULL_OVER = ("stream",)


def design() -> list[dict[str, str]]:
    """Every allowed pair of settings of any two dimensions (in as few cells as the greedy
    design finds), each in every level of the FULL_OVER dimensions."""
    others = {name: levels for name, levels in DIMENSIONS.items() if name not in FULL_OVER}
    full = [
        dict(zip(FULL_OVER, levels, strict=True)) for levels in itertools.product(*(DIMENSIONS[n] for n in FULL_OVER))
    ]
    cells = [
        {**cell, **levels} for cell in pairwise(others, lambda cell: allowed({**cell, **full[0]})) for levels in full
    ]
    return [cell for cell in cells if allowed(cell)]


# --- the clauses ------------------------------------------------------------------------


@dataclass(frozen=True)
class Observed:
    """One cell's responses and what the suite did to provoke its ending."""

    cell: Mapping[str, str]
    completions: Sequence[Completion]
    # The max_tokens the ending was provoked with, or None.
    max_tokens: int | None = None
    # The stop sequence the ending was provoked with, or None.
    stop: str | None = None
    # The tool a named tool_choice names.
    named_tool: str | None = None
    # How many calls the first response made in full and the budget let through whole (0 when
    # the cut fell in the first call, or the ending is not length-tool-args).
    whole_calls_before_cut: int = 0
    # False where the ending could not be provoked and the first response, which ended by
    # itself, stands for the cell: it is judged as a natural end.
    provoked: bool = True

    @property
    def ending(self) -> str:
        return self.cell["ending"] if self.provoked else "stop"


Judge = Callable[[Completion, Observed], tuple[bool, str]]


@dataclass(frozen=True)
class Clause:
    id: str
    # What must hold, as the table in docs/api-contract.md says it.
    rule: str
    # Where it applies, as the table says it, and as a predicate over a cell.
    where: str
    applies: Callable[[Mapping[str, str]], bool]
    layer: Layer
    # (holds, what came back) for one response.
    judge: Judge


def _expected_finish(observed: Observed) -> tuple[str, ...]:
    if observed.ending in LENGTH_ENDINGS:
        return ("length",)
    if observed.ending == "stop-sequence":
        return ("stop",)
    return ("tool_calls",) if observed.cell["tools"] in FORCED_CALL else ("stop", "tool_calls")


def _judge_finish(completion: Completion, observed: Observed) -> tuple[bool, str]:
    expected = _expected_finish(observed)
    return completion.finish_reason in FINISH_REASONS and completion.finish_reason in expected, (
        f"finish_reason {completion.finish_reason!r}"
    )


def _has_text(text: str | None) -> bool:
    return bool(text and text.strip())


def _judge_reasoning(completion: Completion, observed: Observed) -> tuple[bool, str]:
    got = f"reasoning {excerpt(completion.reasoning)}, content {excerpt(completion.content)}"
    if observed.cell["thinking"] == "off":
        return not _has_text(completion.reasoning), got
    return _has_text(completion.reasoning), got


def _judge_answer(completion: Completion, observed: Observed) -> tuple[bool, str]:
    got = f"content {excerpt(completion.content)}, tool_calls {completion.tool_calls}, finish {completion.finish_reason!r}"
    if completion.tool_calls or completion.finish_reason == "tool_calls":
        return True, got  # a call is the turn's answer; tool_calls_match_finish judges it
    if not _has_text(completion.content):
        return False, got
    return observed.stop is None or observed.stop not in (completion.content or ""), got


def _judge_tool_calls(completion: Completion, observed: Observed) -> tuple[bool, str]:
    calls = completion.tool_calls or []
    got = f"tool_calls {calls}, finish_reason {completion.finish_reason!r}"
    # A budget that ran out inside the tools block leaves the calls written whole before it.
    if (completion.finish_reason == "tool_calls" and not calls) or (
        calls and completion.finish_reason not in ("tool_calls", "length")
    ):
        return False, got
    tools, ending = observed.cell["tools"], observed.ending
    if tools in NO_CALL and calls:
        return False, got
    if tools in FORCED_CALL and ending == "stop" and not calls:
        return False, got
    if tools == "named" and any((call.get("function") or {}).get("name") != observed.named_tool for call in calls):
        return False, got
    return True, got


def _fields(completion: Completion) -> list[tuple[str, str | None]]:
    fields: list[tuple[str, str | None]] = [("content", completion.content), ("reasoning", completion.reasoning)]
    for position, call in enumerate(completion.tool_calls or []):
        function = call.get("function") or {}
        fields += [
            (f"tool_calls[{position}].name", function.get("name")),
            (f"tool_calls[{position}].arguments", function.get("arguments")),
        ]
    return fields


def _judge_markup(completion: Completion, observed: Observed) -> tuple[bool, str]:
    leaks = [
        f"{', '.join(found)} in {name} {excerpt(text)}"
        for name, text in _fields(completion)
        if (found := find_markup(text))
    ]
    return not leaks, "; ".join(leaks) or "no markup"


def _judge_usage(completion: Completion, observed: Observed) -> tuple[bool, str]:
    usage = completion.usage or {}
    got = f"usage {usage}, {len(completion.reasoning or '')} characters of reasoning"
    prompt, generated, total = (usage.get(key) for key in ("prompt_tokens", "completion_tokens", "total_tokens"))
    if not all(isinstance(value, int) for value in (prompt, generated, total)):
        return False, got
    assert isinstance(prompt, int) and isinstance(generated, int) and isinstance(total, int)
    if total != prompt + generated:
        return False, got
    if observed.max_tokens is not None and generated > observed.max_tokens:
        return False, got
    if generated < min_tokens(completion.reasoning) + min_tokens(completion.content):
        return False, got
    details = usage.get("completion_tokens_details")
    reported = details.get("reasoning_tokens") if isinstance(details, Mapping) else None
    if isinstance(reported, int):
        # Where reasoning tokens are reported they are part of completion_tokens, and some
        # reasoning takes at least one of them.
        floor = max(1, min_tokens(completion.reasoning)) if _has_text(completion.reasoning) else 0
        return floor <= reported <= generated, got
    return True, got


def _judge_calls_whole(completion: Completion, observed: Observed) -> tuple[bool, str]:
    calls = completion.tool_calls or []
    got = f"tool_calls {calls}, content {excerpt(completion.content)}"
    if observed.ending == "length-tool-args" and observed.whole_calls_before_cut and not calls:
        return False, got
    for call in calls:
        try:
            arguments = json.loads((call.get("function") or {}).get("arguments") or "")
        except ValueError:
            return False, got
        if not isinstance(arguments, dict):
            return False, got
    return True, got


def _judge_stream(completion: Completion, observed: Observed) -> tuple[bool, str]:
    stats = completion.stream
    if stats is None:
        return False, "a whole response where a stream was asked for"
    return stats.finish_frames == 1 and stats.done_marker and stats.usage_frames >= 1, (
        f"{stats.finish_frames} finish frames, {stats.usage_frames} usage frames, [DONE] {stats.done_marker}, of {stats.frames}"
    )


def _always(cell: Mapping[str, str]) -> bool:
    return True


CLAUSES: tuple[Clause, ...] = (
    Clause(
        "finish_reason_as_ended",
        "`finish_reason` is an OpenAI value, the one the ending gives: `length` when max_tokens ran out, "
        "`stop` at a stop sequence, `stop` or `tool_calls` at a natural end (`tool_calls` when a call is forced)",
        "every cell",
        _always,
        "api",
        _judge_finish,
    ),
    Clause(
        "reasoning_where_thinking_says",
        "with thinking on the reasoning is in `reasoning_content` (or `reasoning`) and not empty, whatever the "
        "ending; with thinking off there is none",
        "every cell",
        _always,
        "parser",
        _judge_reasoning,
    ),
    Clause(
        "answer_in_content",
        "a turn that ends without a call has its answer in `content`, not empty and without the stop sequence "
        "that ended it; `content` may be null or empty only beside tool calls",
        "endings stop, stop-sequence, length-answer",
        lambda cell: cell["ending"] in ("stop", "stop-sequence", "length-answer"),
        "parser",
        _judge_answer,
    ),
    Clause(
        "tool_calls_match_finish",
        "`finish_reason` `tool_calls` comes with a non-empty `tool_calls`, and calls with `tool_calls` (or `length`, "
        "below); no call where none may be made (no tools, `none`); a call at a natural end where one is forced, to "
        "the named tool where one is named",
        "every cell",
        _always,
        "parser",
        _judge_tool_calls,
    ),
    Clause(
        "no_markup_in_fields",
        "no serving markup (K3's XTML, K2's markers, think tags) in `content`, the reasoning, a tool's name or its arguments",
        "every cell",
        _always,
        "parser",
        _judge_markup,
    ),
    Clause(
        "usage_adds_up",
        "`usage` has integer counts with total = prompt + completion, completion within max_tokens and enough for "
        "the text returned; reasoning tokens, where reported, within completion and at least one for any reasoning",
        "every cell",
        _always,
        "api",
        _judge_usage,
    ),
    Clause(
        "calls_whole",
        "every call returned is whole: its arguments parse as a JSON object; where max_tokens ran out inside a "
        "call's arguments (length-tool-args) the calls written whole before it are returned (finish_reason "
        "`length`), the cut one is not, and no markup of it is in `content`",
        "every cell",
        _always,
        "parser",
        _judge_calls_whole,
    ),
    Clause(
        "stream_framed",
        "a stream has exactly one finish frame, a usage frame (include_usage is sent) and the closing [DONE]",
        "stream on",
        lambda cell: cell["stream"] == "on",
        "api",
        _judge_stream,
    ),
)
CLAUSE_BY_ID: Mapping[str, Clause] = {clause.id: clause for clause in CLAUSES}


def applies(clause_id: str, cell: Mapping[str, str]) -> bool:
    return CLAUSE_BY_ID[clause_id].applies(cell)


def _check(clause_id: str, observed: Observed) -> None:
    __tracebackhide__ = True
    clause = CLAUSE_BY_ID[clause_id]
    for position, completion in enumerate(observed.completions):
        holds, got = clause.judge(completion, observed)
        copy = f", response {position + 1} of {len(observed.completions)}" if len(observed.completions) > 1 else ""
        provoked = "".join(
            f", {name} {value!r}"
            for name, value in (("max_tokens", observed.max_tokens), ("stop", observed.stop))
            if value is not None
        )
        if not observed.provoked:
            provoked = " (ending not provoked: the first response judged as a natural end)"
        expect(
            holds,
            layer=clause.layer,
            expected=f"clause {clause.id} at cell {cell_id(observed.cell)}{provoked}{copy}",
            got=got,
            hint=f"the contract (docs/api-contract.md): {clause.rule}",
        )


def check_finish_reason_as_ended(observed: Observed) -> None:
    __tracebackhide__ = True
    _check("finish_reason_as_ended", observed)


def check_reasoning_where_thinking_says(observed: Observed) -> None:
    __tracebackhide__ = True
    _check("reasoning_where_thinking_says", observed)


def check_answer_in_content(observed: Observed) -> None:
    __tracebackhide__ = True
    _check("answer_in_content", observed)


def check_tool_calls_match_finish(observed: Observed) -> None:
    __tracebackhide__ = True
    _check("tool_calls_match_finish", observed)


def check_no_markup_in_fields(observed: Observed) -> None:
    __tracebackhide__ = True
    _check("no_markup_in_fields", observed)


def check_usage_adds_up(observed: Observed) -> None:
    __tracebackhide__ = True
    _check("usage_adds_up", observed)


def check_calls_whole(observed: Observed) -> None:
    __tracebackhide__ = True
    _check("calls_whole", observed)


def check_stream_framed(observed: Observed) -> None:
    __tracebackhide__ = True
    _check("stream_framed", observed)


# --- provoking the endings by mechanism ----------------------------------------------------


def reasoning_tokens_of(completion: Completion) -> int:
    """The reasoning's share of completion_tokens: as reported where it is, else estimated from
    the characters of reasoning against those of everything generated."""
    usage = completion.usage or {}
    generated = usage.get("completion_tokens")
    details = usage.get("completion_tokens_details")
    reported = details.get("reasoning_tokens") if isinstance(details, Mapping) else None
    if isinstance(reported, int) and (reported > 0 or not _has_text(completion.reasoning)):
        return reported
    if not isinstance(generated, int):
        return 0
    arguments = sum(len((call.get("function") or {}).get("arguments") or "") for call in completion.tool_calls or [])
    reasoning, rest = len(completion.reasoning or ""), len(completion.content or "") + arguments
    return round(generated * reasoning / (reasoning + rest)) if reasoning + rest else 0


def budget_for(ending: str, first: Completion) -> int | None:
    """The max_tokens that ends a repeat of `first` where `ending` says: half-way through the
    reasoning, or through what follows it, or (calls) half-way through the last call's
    arguments, so that the calls before it are whole; None where `first` is too short to cut there."""
    generated = (first.usage or {}).get("completion_tokens")
    if not isinstance(generated, int):
        return None
    reasoning = reasoning_tokens_of(first)
    after = generated - reasoning
    if ending == "length-reasoning":
        return reasoning // 2 if reasoning >= 2 else None
    if ending == "length-tool-args":
        if not first.tool_calls:
            return None
        lengths = [len((call.get("function") or {}).get("arguments") or "") for call in first.tool_calls]
        last = round(after * lengths[-1] / sum(lengths)) if sum(lengths) else after
        return reasoning + after - last // 2 if last >= 2 else None
    return reasoning + after // 2 if after >= 2 else None


def whole_calls_before_cut(ending: str, first: Completion) -> int:
    """How many of `first`'s calls a repeat cut by `budget_for` keeps whole: all but the last."""
    return max(0, len(first.tool_calls or []) - 1) if ending == "length-tool-args" else 0


def stop_word_for(first: Completion) -> str | None:
    """A word of the answer past its first, absent from the reasoning (where a server matches
    stop strings too) and from the answer before it: the stop sequence that cuts the answer there."""
    content = first.content or ""
    words = content.split()
    reasoning = first.reasoning or ""
    for word in words[len(words) // 2 :] + words[1 : len(words) // 2]:
        if len(word) >= 3 and word.isalpha() and word not in reasoning and content.find(word) > 0:
            return word
    return None
