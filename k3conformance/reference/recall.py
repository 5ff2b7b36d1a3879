"""Earlier thinking that a later turn needs, as the simulator answers it.

K3's chat template keeps the thinking of earlier turns in the prompt when preserve_thinking
is on. The reasoning suite's multi-turn probe asks the model to pick a number privately in
its thinking and answer only "ready", then asks which number it picked: only a deployment
that passes the earlier reasoning back to the model can answer. The simulator does what a
model would: it picks in its reasoning, and later reads the number back from the assistant
turns of the history as the chat template rendered it; with none there, it can only guess.
"""

from __future__ import annotations

import random
import re

_PICK = re.compile(r"\bpick a secret number\b", re.IGNORECASE)
_RECALL = re.compile(r"\bnumber you picked\b", re.IGNORECASE)
_PICKED = re.compile(r"I pick the number (\d+)\.")
READY = "ready"


def on_turn(rng: random.Random, question: str, reasoning: str, earlier_reasoning: str) -> tuple[str, str | None]:
    """The turn's reasoning, and its reply when the question is a pick or a recall (else None).

    `earlier_reasoning`: the earlier turns' reasoning as the chat template rendered it
    (prompt.rendered_reasoning), which is all the model can read back."""
    if _PICK.search(question) and reasoning:
        return f"{reasoning} I pick the number {rng.randrange(100_000, 1_000_000)}.", READY
    if _RECALL.search(question):
        found = _PICKED.findall(earlier_reasoning)
        # Without the earlier thinking, a model can only guess: a number that was never picked.
        return reasoning, found[-1] if found else str(rng.randrange(100_000, 1_000_000))
    return reasoning, None
