"""K3 state and cache consistency: answers must not change when a long prefix is reused,
whether the same prompt is asked again or a conversation continues a long history.
Logic and the statistical test: `k3conformance/checks/state_consistency.py`."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from k3conformance import Completion, Exchange, Probe, ProbeResult, load_fixture
from k3conformance.checks.state_consistency import (
    agreement,
    check_continued_history_keeps_answers,
    check_prefix_reuse_keeps_answers,
    extracted_code,
)
from k3conformance.datasets.long_prompts import long_document

SUITE = "state_consistency"
MODES = ("plain", "stream")
MAX_TOKENS = 8192
FIXTURE = load_fixture("cache")
ITEMS = FIXTURE.items


def _prompt_words(exchange: Exchange) -> int:
    return int(exchange.settings.cache_prompt_words)


def _document(exchange: Exchange, index: int, copy_label: str) -> str:
    item, following = ITEMS[index], ITEMS[(index + 1) % len(ITEMS)]
    # The run id keeps an earlier run's server-side cache out of the "cold" requests.
    return long_document(
        words=_prompt_words(exchange),
        seed=f"{item['id']}-{exchange.run_id}",
        needle=f"{item['needle']} {following['needle']}",
        copy_label=f"{copy_label} of run {exchange.run_id}",
    )


def _question(item: dict[str, Any]) -> str:
    return f"{item['prompt']} Answer with the code only."


async def _item(exchange: Exchange, index: int, mode: str) -> None:
    item, following = ITEMS[index], ITEMS[(index + 1) % len(ITEMS)]
    stream = mode == "stream"

    # Each mode has prompts of its own: one mode's requests must not warm the other's.
    first_copy, second_copy, third_copy = (f"copy {label}, {mode}" for label in "ABC")

    def single(copy_label: str) -> list[dict[str, Any]]:
        return [{"role": "user", "content": _document(exchange, index, copy_label) + "\n\n" + _question(item)}]

    first = await exchange.send(f"{mode}-{index}-cold", {"messages": single(first_copy), "stream": stream})
    # Only now is the prefix in the server's cache: the same prompt again is warm, a copy
    # with another first line is cold.
    continued: list[Any] = []
    if isinstance(first, Completion):
        continued = [
            *single(first_copy),
            first.as_history_message(),
            {"role": "user", "content": _question(following)},
        ]
    sends = [
        exchange.send(f"{mode}-{index}-warm", {"messages": single(first_copy), "stream": stream}),
        exchange.send(f"{mode}-{index}-cold-copy", {"messages": single(second_copy), "stream": stream}),
    ]
    if continued:
        # A third copy: the second one is already in the cache from the request above.
        cold_history = [*single(third_copy), *continued[1:]]
        sends += [
            exchange.send(f"{mode}-{index}-turn2-warm", {"messages": continued, "stream": stream}),
            exchange.send(f"{mode}-{index}-turn2-cold", {"messages": cold_history, "stream": stream}),
        ]
    await asyncio.gather(*sends)


async def _conversation(exchange: Exchange) -> None:
    await asyncio.gather(*(_item(exchange, index, mode) for index in range(len(ITEMS)) for mode in MODES))


PROBE = Probe(
    SUITE, "long-prefix", conversation=_conversation, samples=1, max_tokens=MAX_TOKENS, data=FIXTURE.provenance()
)


def _codes(result: ProbeResult, mode: str, step: str) -> list[str | None]:
    return [extracted_code(result.completion(f"{mode}-{index}-{step}").content) for index in range(len(ITEMS))]


@pytest.mark.parametrize("probe", [PROBE], ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_prefix_reuse_keeps_answers(
    probe: Probe, mode: str, k3_result: ProbeResult, k3_metrics: dict[str, float]
) -> None:
    result = agreement(
        _codes(k3_result, mode, "cold"), _codes(k3_result, mode, "warm"), _codes(k3_result, mode, "cold-copy")
    )
    k3_metrics.update(
        {
            f"prefix_warm_agree_{mode}": result.warm_agrees,
            f"prefix_cold_agree_{mode}": result.cold_agrees,
            f"prefix_items_{mode}": result.items,
        }
    )
    check_prefix_reuse_keeps_answers(result, mode)


@pytest.mark.parametrize("probe", [PROBE], ids=str)
@pytest.mark.parametrize("mode", MODES)
def test_continued_history_keeps_answers(
    probe: Probe, mode: str, k3_result: ProbeResult, k3_metrics: dict[str, float]
) -> None:
    reference = [extracted_code(item["answer"]) for item in (ITEMS[(i + 1) % len(ITEMS)] for i in range(len(ITEMS)))]
    warm = _codes(k3_result, mode, "turn2-warm")
    cold = _codes(k3_result, mode, "turn2-cold")
    # The second turn has no cold twin of its own history, so both copies are compared
    # with the answer key: a corrupted continuation loses agreement the cold copy keeps.
    result = agreement(reference, warm, cold)
    k3_metrics.update(
        {f"history_warm_agree_{mode}": result.warm_agrees, f"history_cold_agree_{mode}": result.cold_agrees}
    )
    check_continued_history_keeps_answers(result, mode)
