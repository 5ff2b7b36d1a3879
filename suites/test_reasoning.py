"""Reasoning parser: thinking in the reasoning field, the answer in content, nothing else.

Every check runs on a non-streaming and a streaming request (`mode`); streams are
reassembled into the same shape, and what only a stream can get wrong is checked on
its frames. Logic: `k3conformance/checks/reasoning.py`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from k3conformance import Completion, Exchange, Probe, ProbeResult, Settings, load_fixture
from k3conformance.checks import reasoning as checks
from k3conformance.probes.request_body import thinking_fields

SUITE = "reasoning"
MODES = ("plain", "stream")
MAX_TOKENS = 8192
TRUNCATED_BUDGET = 16
# Samples per effort for the effort check: a one-sided exact permutation test over 6 + 6
# lengths can reach p = 0.001.
EFFORT_SAMPLES = 6
EFFORTS = ("low", "high", "max")

FIXTURE = load_fixture(SUITE)
MULTI_TURN: dict[str, str] = FIXTURE.extra["multi_turn"]


def ask(prompt: str, mode: str, **extra: Any) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": prompt}], "stream": mode == "stream", **extra}


ITEMS = [
    Probe(
        SUITE,
        item["id"],
        requests={
            **{mode: ask(item["prompt"], mode) for mode in MODES},
            **{f"truncated-{mode}": ask(item["prompt"], mode, max_tokens=TRUNCATED_BUDGET) for mode in MODES},
        },
        samples=1,
        max_tokens=MAX_TOKENS,
        data=FIXTURE.provenance(),
    )
    for item in FIXTURE.items
]
EFFORT = Probe(
    SUITE,
    "effort",
    requests={
        f"{effort}-{mode}": ask(FIXTURE.items[0]["prompt"], mode, reasoning_effort=effort)
        for effort in EFFORTS
        for mode in MODES
    },
    samples=EFFORT_SAMPLES,
    max_tokens=MAX_TOKENS,
    data=FIXTURE.provenance(),
)


async def _multi_turn(exchange: Exchange) -> None:
    first_question = {"role": "user", "content": MULTI_TURN["first"]}
    first = await exchange.send("first", {"messages": [first_question]})
    if not isinstance(first, Completion):
        return
    # K3's chat template keeps earlier thinking when preserve_thinking is on: the
    # server must accept the assistant turn with its reasoning.
    history = [first_question, first.as_history_message()]
    follow_up = [*history, {"role": "user", "content": MULTI_TURN["follow_up"]}]
    for mode in MODES:
        await exchange.send(mode, {"messages": follow_up, "stream": mode == "stream"})


MULTI_TURN_PROBE = Probe(SUITE, "multi-turn", conversation=_multi_turn, samples=1, max_tokens=MAX_TOKENS)

items = pytest.mark.parametrize("probe", ITEMS, ids=str)
modes = pytest.mark.parametrize("mode", MODES)


@items
@modes
def test_reasoning_present(probe: Probe, mode: str, k3_result: ProbeResult, k3_settings: Settings) -> None:
    checks.check_reasoning_present(k3_result.completion(mode), mode, strict_field=k3_settings.strict_reasoning_field)


@items
@modes
def test_no_markup_leaks(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    checks.check_no_markup_leaks(k3_result.completion(mode), mode)


@items
@modes
def test_answer_follows_reasoning(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    checks.check_answer_follows_reasoning(k3_result.completion(mode), mode)


@items
@modes
def test_truncation_reported_as_length(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    checks.check_truncation_reported_as_length(k3_result.completion(f"truncated-{mode}"), mode, TRUNCATED_BUDGET)


@items
@modes
def test_usage_counts_reasoning(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    checks.check_usage_counts_reasoning(k3_result.completion(mode), mode)


@items
def test_stream_reasoning_before_content(probe: Probe, k3_result: ProbeResult) -> None:
    checks.check_stream_reasoning_before_content(k3_result.completion("stream"))


@items
def test_stream_one_finish_frame(probe: Probe, k3_result: ProbeResult) -> None:
    checks.check_stream_one_finish_frame(k3_result.completion("stream"))


@items
def test_stream_usage_frame(probe: Probe, k3_result: ProbeResult) -> None:
    checks.check_stream_usage_frame(k3_result.completion("stream"))


@items
def test_stream_reasoning_not_nulled(probe: Probe, k3_result: ProbeResult) -> None:
    checks.check_stream_reasoning_not_nulled(k3_result.completion("stream"))


@pytest.mark.parametrize("probe", [EFFORT], ids=str)
@modes
def test_effort_orders_reasoning_length(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    lengths = {
        effort: [len((completion.reasoning or "").split()) for completion in k3_result.completions(f"{effort}-{mode}")]
        for effort in EFFORTS
    }
    checks.check_effort_orders_reasoning_length(lengths, mode)


@pytest.mark.parametrize("probe", [MULTI_TURN_PROBE], ids=str)
@modes
def test_multi_turn_with_reasoning_history(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    checks.check_multi_turn_with_reasoning_history(
        k3_result.completion("first"),
        k3_result.completion(mode),
        f"{mode}, second turn with the first turn's reasoning",
    )


# --- the thinking parameters: each sent alone and together ---------------------------
# These probes send exactly the thinking parameters below (thinking_as_given), in the
# form --k3-think-mode names: Kimi's `thinking` object or open-source `chat_template_kwargs`.


def effort_field(think_mode: str) -> str:
    return "thinking.effort" if think_mode == "kimi" else "chat_template_kwargs.thinking_effort"


async def _effort_contract(exchange: Exchange) -> None:
    mode = exchange.settings.think_mode
    steps = {
        "omitted": {},
        "field-low": thinking_fields(mode, effort="low"),
        "field-max": thinking_fields(mode, effort="max"),
        "reasoning-effort-low": {"reasoning_effort": "low"},
        "field-low-reasoning-effort-max": {**thinking_fields(mode, effort="low"), "reasoning_effort": "max"},
    }
    prompt = FIXTURE.items[0]["prompt"]
    await asyncio.gather(*(exchange.send(step, ask(prompt, "plain", **fields)) for step, fields in steps.items()))


# Reasoning length is the only signal, so each step is sampled; one mode (request
# handling does not depend on streaming, which the other checks cover).
EFFORT_CONTRACT = Probe(
    SUITE,
    "effort-contract",
    conversation=_effort_contract,
    samples=EFFORT_SAMPLES,
    max_tokens=MAX_TOKENS,
    thinking_as_given=True,
    data=FIXTURE.provenance(),
)


def _reasoning_words(result: ProbeResult, step: str) -> list[int]:
    return [len((completion.reasoning or "").split()) for completion in result.completions(step)]


effort_contract = pytest.mark.parametrize("probe", [EFFORT_CONTRACT], ids=str)


@effort_contract
def test_effort_omitted_means_max(probe: Probe, k3_result: ProbeResult) -> None:
    words = {step: _reasoning_words(k3_result, step) for step in ("omitted", "field-low", "field-max")}
    checks.check_effort_omitted_means_max(words["omitted"], words["field-low"], words["field-max"])


@effort_contract
def test_effort_parameter_applied(probe: Probe, k3_result: ProbeResult, k3_settings: Settings) -> None:
    top = _reasoning_words(k3_result, "field-max")
    field = effort_field(k3_settings.think_mode)
    checks.check_effort_parameter_applied(_reasoning_words(k3_result, "field-low"), top, f"{field} alone")


@effort_contract
def test_reasoning_effort_alone_applied(probe: Probe, k3_result: ProbeResult) -> None:
    top = _reasoning_words(k3_result, "field-max")
    checks.check_reasoning_effort_alone_applied(_reasoning_words(k3_result, "reasoning-effort-low"), top)


@effort_contract
def test_effort_field_wins_over_reasoning_effort(probe: Probe, k3_result: ProbeResult, k3_settings: Settings) -> None:
    both = _reasoning_words(k3_result, "field-low-reasoning-effort-max")
    parameter = f"{effort_field(k3_settings.think_mode)} with reasoning_effort max"
    checks.check_effort_field_wins_over_reasoning_effort(both, _reasoning_words(k3_result, "field-max"), parameter)


async def _thinking_disabled(exchange: Exchange) -> None:
    # keep "none" and an effort come along: both mean nothing once thinking is off, and
    # must not be refused (KVV test_disabled_ignores_keep).
    fields = thinking_fields(exchange.settings.think_mode, enabled=False, effort="high", keep=False)
    prompt = FIXTURE.items[0]["prompt"]
    await asyncio.gather(*(exchange.send(mode, ask(prompt, mode, **fields)) for mode in MODES))


THINKING_DISABLED = Probe(
    SUITE,
    "thinking-disabled",
    conversation=_thinking_disabled,
    samples=1,
    max_tokens=MAX_TOKENS,
    thinking_as_given=True,
    data=FIXTURE.provenance(),
)


@pytest.mark.parametrize("probe", [THINKING_DISABLED], ids=str)
@modes
def test_thinking_disabled(probe: Probe, mode: str, k3_result: ProbeResult, k3_settings: Settings) -> None:
    how = "thinking.type disabled" if k3_settings.think_mode == "kimi" else "chat_template_kwargs.thinking false"
    checks.check_thinking_disabled(k3_result.completion(mode), f"{how}, {mode}")


# Three earlier turns; a fact the last question needs is only in the first turn's reasoning.
KEEP_CODE = "7382"
KEEP_HISTORY: list[dict[str, Any]] = [
    {"role": "user", "content": "I will give you a code to remember. Reply only with 'noted'."},
    {
        "role": "assistant",
        "content": "noted",
        "reasoning_content": f"The user wants me to remember a code. The value of the key 'vault-code' is '{KEEP_CODE}'.",
    },
    {"role": "user", "content": "Thanks. Reply only with 'noted' again."},
    {"role": "assistant", "content": "noted", "reasoning_content": "Nothing new to remember here."},
    {"role": "user", "content": "What is the value of the key 'vault-code'? Answer with the code only."},
]
STRIPPED_HISTORY = [{key: value for key, value in m.items() if key != "reasoning_content"} for m in KEEP_HISTORY]


async def _keep_all(exchange: Exchange) -> None:
    fields = thinking_fields(exchange.settings.think_mode, keep=True)
    sends = []
    for mode in MODES:
        stream = mode == "stream"
        sends.append(exchange.send(f"keep-{mode}", {"messages": KEEP_HISTORY, "stream": stream, **fields}))
        sends.append(exchange.send(f"stripped-{mode}", {"messages": STRIPPED_HISTORY, "stream": stream, **fields}))
    await asyncio.gather(*sends)


KEEP_ALL = Probe(SUITE, "keep-all", conversation=_keep_all, samples=1, max_tokens=MAX_TOKENS, thinking_as_given=True)
keep_all = pytest.mark.parametrize("probe", [KEEP_ALL], ids=str)


@keep_all
@modes
def test_keep_all_answer_uses_history_reasoning(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    checks.check_keep_all_answer_uses_history_reasoning(k3_result.completion(f"keep-{mode}"), KEEP_CODE, mode)


@keep_all
@modes
def test_keep_all_counts_history_reasoning(probe: Probe, mode: str, k3_result: ProbeResult) -> None:
    checks.check_keep_all_counts_history_reasoning(
        k3_result.completion(f"keep-{mode}"), k3_result.completion(f"stripped-{mode}"), mode
    )
