"""State and cache consistency: a reused prompt prefix must not change the answer.

K3 keeps a fixed-size recurrent state per request in 69 of its 93 layers. SGLang
snapshots that state at fixed prompt positions for prefix caching and ships it between
prefill and decode servers in disaggregated shapes; bugs there corrupt answers only when
a prefix is reused. So each long prompt is asked cold, then again warm (same prefix), and
a copy with a different first line is asked cold as well: warm answers must agree with the
cold ones as often as two cold runs agree.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from k3conformance.checks.failures import expect
from k3conformance.stats.exact import binomial_p_at_least

ALPHA = 0.05


def extracted_code(content: str | None) -> str | None:
    """The last number of three or more digits in an answer ("The code is 4711." -> 4711)."""
    found = re.findall(r"\d{3,}", content or "")
    return found[-1] if found else None


@dataclass(frozen=True)
class Agreement:
    items: int
    warm_agrees: int
    cold_agrees: int
    # Items where only the cold repeat agreed / only the warm repeat agreed.
    only_cold: int
    only_warm: int

    @property
    def p_value(self) -> float:
        """One-sided exact McNemar test that warm repeats agree less often than cold ones."""
        discordant = self.only_cold + self.only_warm
        return binomial_p_at_least(self.only_cold, discordant, 0.5) if discordant else 1.0


def agreement(first: Sequence[str | None], warm: Sequence[str | None], cold: Sequence[str | None]) -> Agreement:
    warm_hits = [a is not None and a == b for a, b in zip(first, warm, strict=True)]
    cold_hits = [a is not None and a == b for a, b in zip(first, cold, strict=True)]
    return Agreement(
        items=len(first),
        warm_agrees=sum(warm_hits),
        cold_agrees=sum(cold_hits),
        only_cold=sum(c and not w for w, c in zip(warm_hits, cold_hits, strict=True)),
        only_warm=sum(w and not c for w, c in zip(warm_hits, cold_hits, strict=True)),
    )


def check_prefix_reuse_keeps_answers(result: Agreement, mode: str) -> None:
    __tracebackhide__ = True
    check_agreement(result, "the same long prompt asked again (warm prefix cache)", mode)


def check_continued_history_keeps_answers(result: Agreement, mode: str) -> None:
    __tracebackhide__ = True
    check_agreement(result, "a conversation continuing a long history (warm prefix)", mode)


def check_agreement(result: Agreement, what: str, mode: str) -> None:
    __tracebackhide__ = True
    expect(
        2 * max(result.cold_agrees, result.warm_agrees) >= result.items,
        layer="model",
        expected=f"codes found and agreeing on at least half of the {result.items} items, or nothing can be judged ({mode})",
        got=f"warm agreement {result.warm_agrees}/{result.items}, cold agreement {result.cold_agrees}/{result.items}",
        hint="the model did not retrieve the codes from the long prompts; try a larger --k3-max-tokens",
    )
    expect(
        result.p_value >= ALPHA,
        # The engine computes wrong outputs: it shows as the model's answers changing.
        layer="model",
        expected=(
            f"{what} to agree with the first answer as often as a cold copy does ({mode}; one-sided exact "
            f"McNemar test, p >= {ALPHA})"
        ),
        got=(
            f"warm agreement {result.warm_agrees}/{result.items}, cold agreement {result.cold_agrees}/{result.items}, "
            f"p = {result.p_value:.4f}"
        ),
        hint="prefix caching or state transfer (KDA state snapshots, PD disaggregation) corrupts reused prefixes",
    )
