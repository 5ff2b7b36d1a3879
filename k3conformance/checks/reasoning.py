"""Checks of how the reasoning parser splits K3's thinking from its answer.

K3 always thinks. A healthy `--reasoning-parser kimi_k3` puts the thinking in
`reasoning_content` (SGLang) or `reasoning` (newer vLLM) and the answer in `content`,
with no markup left in either, in streams as in whole responses.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Literal

from k3conformance.checks.failures import expect
from k3conformance.endpoint.completion import FINISH_REASONS, Completion, StreamStats
from k3conformance.formatting import excerpt
from k3conformance.stats.exact import permutation_p_greater
from k3conformance.xtml.markup import find_markup

STRICT_FIELD = "reasoning_content"
EFFORT_ALPHA = 0.05
# A conservative ceiling on characters per token: BPE tokenizers average about 4 characters
# of English per token (fewer for code and CJK), and even long vocabulary entries do not
# average 8 over hundreds of words. Counted without whitespace, which indentation can pack
# into single tokens. Texts shorter than the floor's reach (a word or two) are not bounded.
MAX_CHARS_PER_TOKEN = 8
_WHITESPACE = re.compile(r"\s+")


def min_tokens(text: str | None) -> int:
    """The fewest tokens `text` can take at MAX_CHARS_PER_TOKEN characters per token."""
    return len(_WHITESPACE.sub("", text or "")) // MAX_CHARS_PER_TOKEN


def check_reasoning_present(completion: Completion, mode: str, *, strict_field: bool) -> None:
    __tracebackhide__ = True
    expect(
        bool(completion.reasoning and completion.reasoning.strip()),
        layer="parser",
        expected=f"non-empty reasoning in reasoning_content or reasoning ({mode}); K3 always thinks",
        got=f"reasoning field {completion.reasoning_field!r}, content {excerpt(completion.content)}",
        hint="start the server with --reasoning-parser kimi_k3",
    )
    if strict_field:
        expect(
            completion.reasoning_field == STRICT_FIELD,
            layer="parser",
            expected=f"reasoning in {STRICT_FIELD} (--k3-strict-reasoning-field)",
            got=f"reasoning in {completion.reasoning_field!r}",
        )


def check_no_markup_leaks(completion: Completion, mode: str) -> None:
    __tracebackhide__ = True
    for field_name, text in (("content", completion.content), ("reasoning", completion.reasoning)):
        found = find_markup(text)
        expect(
            not found,
            layer="parser",
            expected=f"no serving markup in {field_name} ({mode})",
            got=f"{', '.join(found)} in {excerpt(text)}",
            hint="a parser that misses K3's XTML or K2's markers leaks them into the API fields",
        )


def check_answer_follows_reasoning(completion: Completion, mode: str) -> None:
    __tracebackhide__ = True
    expect(
        completion.finish_reason in FINISH_REASONS,
        layer="api",
        expected=f"finish_reason one of {', '.join(FINISH_REASONS)} ({mode})",
        got=completion.finish_reason,
        hint="a raw stop token such as stop_163586 is not an OpenAI finish reason",
    )
    if completion.finish_reason != "length":
        expect(
            bool(completion.content and completion.content.strip()) or bool(completion.tool_calls),
            layer="parser",
            expected=f"an answer in content after the reasoning ({mode})",
            got=f"content {completion.content!r}, reasoning ending {excerpt((completion.reasoning or '')[-200:])}",
        )


def check_truncation_reported_as_length(completion: Completion, mode: str, budget: int) -> None:
    __tracebackhide__ = True
    generated = (completion.usage or {}).get("completion_tokens")
    # A model that stopped on its own under the budget did not think (K3 always does at
    # length); a server that cut it at the budget and called that `stop` misreports.
    stopped_early = isinstance(generated, int) and generated < budget and completion.finish_reason == "stop"
    expect(
        completion.finish_reason == "length",
        layer="model" if stopped_early else "api",
        expected=f"finish_reason 'length' when max_tokens={budget} runs out during the reasoning ({mode})",
        got=f"finish_reason {completion.finish_reason!r}, usage {completion.usage}",
    )


def check_usage_counts_reasoning(completion: Completion, mode: str) -> None:
    __tracebackhide__ = True
    usage = completion.usage or {}
    expect(bool(usage), layer="api", expected=f"a usage object ({mode})", got=usage)
    prompt, generated, total = (usage.get(key) for key in ("prompt_tokens", "completion_tokens", "total_tokens"))
    expect(
        all(isinstance(value, int) for value in (prompt, generated, total)) and total == prompt + generated,  # type: ignore[operator]
        layer="api",
        expected=f"integer token counts with total = prompt + completion ({mode})",
        got=usage,
    )
    details = usage.get("completion_tokens_details") or {}
    reasoning_tokens = details.get("reasoning_tokens") if isinstance(details, Mapping) else None
    if isinstance(reasoning_tokens, int):
        expect(
            generated >= reasoning_tokens,  # type: ignore[operator]
            layer="api",
            expected=f"completion_tokens to include the {reasoning_tokens} reasoning tokens ({mode})",
            got=usage,
        )
        floor = min_tokens(completion.reasoning)
        expect(
            reasoning_tokens >= floor,
            layer="api",
            expected=(
                f"reasoning_tokens of at least {floor} for {len(completion.reasoning or '')} characters of reasoning "
                f"(at most {MAX_CHARS_PER_TOKEN} characters per token) ({mode})"
            ),
            got=usage,
        )
    # With or without a breakdown, what was generated must fit in what was counted.
    floor = min_tokens(completion.reasoning) + min_tokens(completion.content)
    expect(
        generated >= floor,  # type: ignore[operator]
        layer="api",
        expected=(
            f"completion_tokens of at least {floor} for {len(completion.reasoning or '')} characters of reasoning and "
            f"{len(completion.content or '')} of content (at most {MAX_CHARS_PER_TOKEN} characters per token) ({mode})"
        ),
        got=usage,
        hint="the server's usage must count the thinking tokens too: clients are billed and budgeted by it",
    )


def check_multi_turn_with_reasoning_history(first: Completion, follow_up: Completion, mode: str) -> None:
    """The follow-up asks for a number the first turn picked only in its thinking: a server
    that accepts the earlier reasoning but drops it from the prompt cannot answer."""
    __tracebackhide__ = True
    check_answer_follows_reasoning(follow_up, mode)
    picked = set(_NUMBER.findall(first.reasoning or "")) - set(_NUMBER.findall(first.content or ""))
    expect(
        bool(picked),
        # No reasoning at all is reasoning_present's failure, the parser's.
        layer="model" if first.reasoning else "parser",
        expected=f"the first turn to pick a number in its reasoning and keep it out of its answer ({mode})",
        got=f"reasoning ending {excerpt((first.reasoning or '')[-200:])}, answer {excerpt(first.content)}",
    )
    answered = set(_NUMBER.findall(follow_up.content or ""))
    expect(
        bool(answered & picked),
        layer="api",
        expected=f"the second turn to name the number picked in the first turn's reasoning, one of {sorted(picked)} ({mode})",
        got=f"answer {excerpt(follow_up.content)}",
        hint="the earlier reasoning must reach the model: K3's template keeps it with preserve_thinking",
    )


_NUMBER = re.compile(r"\b\d{4,}\b")


def check_effort_orders_reasoning_length(lengths: Mapping[str, Sequence[int]], mode: str) -> None:
    """Mean reasoning length (words) must grow from `low` to `max`: a one-sided exact
    permutation test at level 0.05 over the samples of each effort."""
    __tracebackhide__ = True
    low, top = list(lengths["low"]), list(lengths["max"])
    p_value = permutation_p_greater(top, low)
    means = ", ".join(f"{effort} {sum(values) / len(values):.0f}" for effort, values in lengths.items())
    # No reasoning at any effort is reasoning_present's failure (the parser's), not the effort's.
    no_reasoning = not any(value for values in lengths.values() for value in values)
    expect(
        p_value < EFFORT_ALPHA,
        layer="parser" if no_reasoning else "api",
        expected=(
            f"longer reasoning at effort max than at low ({mode}; one-sided permutation test over "
            f"{len(top)}+{len(low)} samples, p < {EFFORT_ALPHA})"
        ),
        got=f"mean words {means}; p = {p_value:.3f}",
        hint="the effort must reach the chat template (chat_template_kwargs.thinking_effort or thinking.effort)",
    )


def _stream_stats(completion: Completion) -> StreamStats:
    if completion.stream is None:
        raise TypeError("a stream-only check was given a non-streaming completion")
    return completion.stream


def check_stream_reasoning_before_content(completion: Completion) -> None:
    __tracebackhide__ = True
    stats = _stream_stats(completion)
    if stats.first_content_frame is None or stats.last_reasoning_frame is None:
        return
    expect(
        stats.last_reasoning_frame < stats.first_content_frame,
        layer="parser",
        expected="every reasoning delta before the first content delta",
        got=f"reasoning in frames {stats.first_reasoning_frame}-{stats.last_reasoning_frame}, "
        f"content from frame {stats.first_content_frame}",
    )


def check_stream_one_finish_frame(completion: Completion) -> None:
    __tracebackhide__ = True
    stats = _stream_stats(completion)
    expect(
        stats.finish_frames == 1,
        layer="api",
        expected="exactly one stream frame with a finish_reason",
        got=f"{stats.finish_frames} finish frames among {stats.frames}",
    )


def check_stream_usage_frame(completion: Completion) -> None:
    __tracebackhide__ = True
    stats = _stream_stats(completion)
    expect(
        stats.usage_frames >= 1 and completion.usage is not None,
        layer="api",
        expected="a usage frame, since stream_options.include_usage was set",
        got=f"{stats.usage_frames} usage frames among {stats.frames}",
    )


def check_stream_reasoning_not_nulled(completion: Completion) -> None:
    __tracebackhide__ = True
    stats = _stream_stats(completion)
    lost = not completion.reasoning and stats.null_reasoning_frames >= max(1, stats.frames - 2)
    expect(
        not lost,
        layer="parser",
        expected="reasoning deltas in the stream",
        got=f"reasoning_content: null on {stats.null_reasoning_frames} of {stats.frames} frames and no reasoning",
        hint="SGLang issue 39898: the streaming reasoning parser dropped the thinking",
    )


# --- the thinking parameters (K3's request contract) ----------------------------------
# Sources: SGLang 0.5.23 serving_chat.py (chat_template_kwargs.thinking_effort wins, and
# reasoning_effort fills in only where it is absent) and Moonshot's Kimi-Vendor-Verifier
# tests/k3_features/test_thinking_effort.py (thinking.effort wins; effort omitted is max).


def _mean(values: Sequence[int]) -> float:
    return sum(values) / len(values) if values else 0.0


def _longer(longer: Sequence[int], shorter: Sequence[int]) -> float:
    """p-value that `longer` reasons more than `shorter` (one-sided exact permutation test)."""
    return permutation_p_greater(list(longer), list(shorter))


def _effort_failure_layer(*samples: Sequence[int]) -> Literal["parser", "api"]:
    # No reasoning at all is reasoning_present's failure (the parser's), not the effort's.
    return "api" if any(value for values in samples for value in values) else "parser"


def check_effort_omitted_means_max(omitted: Sequence[int], low: Sequence[int], top: Sequence[int]) -> None:
    """Without any effort parameter K3 reasons at `max`: longer than at `low`, and not
    significantly shorter than at `max`."""
    __tracebackhide__ = True
    above_low, below_max = _longer(omitted, low), _longer(top, omitted)
    expect(
        above_low < EFFORT_ALPHA and below_max >= EFFORT_ALPHA,
        layer=_effort_failure_layer(omitted, low, top),
        expected=(
            f"reasoning at effort max when no effort is sent: longer than low (p < {EFFORT_ALPHA}) and not "
            "shorter than max"
        ),
        got=(
            f"mean words: omitted {_mean(omitted):.0f}, low {_mean(low):.0f}, max {_mean(top):.0f}; "
            f"p(omitted > low) = {above_low:.3f}, p(max > omitted) = {below_max:.3f}"
        ),
        hint="K3's default effort is max; a server default of high or low shows here",
    )


def check_effort_parameter_applied(applied: Sequence[int], top: Sequence[int], parameter: str) -> None:
    """A request for effort `low` through `parameter` reasons less than one for `max`."""
    __tracebackhide__ = True
    p_value = _longer(top, applied)
    expect(
        p_value < EFFORT_ALPHA,
        layer=_effort_failure_layer(applied, top),
        expected=f"shorter reasoning for effort low sent as {parameter} than for max (p < {EFFORT_ALPHA})",
        got=f"mean words: low via {parameter} {_mean(applied):.0f}, max {_mean(top):.0f}; p = {p_value:.3f}",
        hint=(
            "the parameter must reach the chat template; where both are given, thinking.effort / "
            "chat_template_kwargs.thinking_effort wins over reasoning_effort (SGLang, Moonshot's API)"
        ),
    )


def check_thinking_disabled(completion: Completion, how: str) -> None:
    """With thinking off there is no reasoning, and an answer."""
    __tracebackhide__ = True
    expect(
        not (completion.reasoning or "").strip(),
        layer="api",
        expected=f"no reasoning with thinking disabled ({how})",
        got=f"reasoning {excerpt(completion.reasoning)}",
        hint="the switch must reach the chat template (chat_template_kwargs.thinking or thinking.type)",
    )
    expect(
        bool((completion.content or "").strip()),
        layer="parser",
        expected=f"an answer in content with thinking disabled ({how})",
        got=f"content {completion.content!r}",
    )


def check_keep_all_answer_uses_history_reasoning(completion: Completion, needed: str, mode: str) -> None:
    """The answer needs a fact that only an earlier turn's reasoning carried."""
    __tracebackhide__ = True
    expect(
        needed in (completion.content or ""),
        layer="api",
        expected=f"an answer with {needed!r}, which only an earlier turn's reasoning holds ({mode}; keep all)",
        got=f"content {excerpt(completion.content)}",
        hint='thinking.keep "all" / chat_template_kwargs.preserve_thinking must keep earlier reasoning in the prompt',
    )


def check_keep_all_counts_history_reasoning(kept: Completion, stripped: Completion, mode: str) -> None:
    """The kept reasoning is part of the prompt, so it is counted in prompt_tokens."""
    __tracebackhide__ = True
    with_reasoning = (kept.usage or {}).get("prompt_tokens")
    without = (stripped.usage or {}).get("prompt_tokens")
    expect(
        isinstance(with_reasoning, int) and isinstance(without, int) and with_reasoning > without,
        layer="api",
        expected=f"more prompt_tokens with the earlier turns' reasoning than without it ({mode}; keep all)",
        got=f"prompt_tokens {with_reasoning} with, {without} without",
        hint="a template that drops earlier reasoning counts the same prompt both ways",
    )


def check_reasoning_effort_alone_applied(low: Sequence[int], top: Sequence[int]) -> None:
    """`reasoning_effort` sent alone takes effect: its low is shorter than the effort field's max."""
    __tracebackhide__ = True
    check_effort_parameter_applied(low, top, "reasoning_effort")


def check_effort_field_wins_over_reasoning_effort(both: Sequence[int], top: Sequence[int], parameter: str) -> None:
    """With both sent, the thinking effort field takes effect over `reasoning_effort` (docs/api-contract.md)."""
    __tracebackhide__ = True
    check_effort_parameter_applied(both, top, parameter)
