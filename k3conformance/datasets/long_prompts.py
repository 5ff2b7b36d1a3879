"""Long prompts made deterministically from a seed, so a baseline and a candidate see the
same text: filler prose (the state-consistency prompts, the generated long-context tasks of
long_tasks.py), and the single key-value needle format that the reasoning suite's recall
check asks with and the simulator answers (`needle_answer`)."""

from __future__ import annotations

import random
import re

_WORDS = [
    "ledger",
    "quarterly",
    "river",
    "lantern",
    "orchard",
    "meridian",
    "copper",
    "signal",
    "harbor",
    "paper",
    "window",
    "garden",
    "council",
    "engine",
    "valley",
    "winter",
    "market",
    "silver",
    "library",
    "compass",
    "thread",
    "basin",
    "harvest",
    "beacon",
    "station",
    "granite",
    "meadow",
    "archive",
    "canal",
    "timber",
    "summit",
    "pattern",
    "journal",
]
# English prose runs at about 1.3 tokens per word for K3-class tokenizers.
TOKENS_PER_WORD = 1.3
_NEEDLE = "The value of the key '{key}' is '{value}'."
_ASKED = re.compile(r"What is the value of the key '([^']+)'\?")


def filler_sentences(rng: random.Random, words: int) -> list[str]:
    sentences: list[str] = []
    count = 0
    while count < words:
        length = rng.randint(8, 16)
        sentences.append(" ".join(rng.choice(_WORDS) for _ in range(length)).capitalize() + ".")
        count += length
    return sentences


def quick_filler(rng: random.Random, words: int) -> list[str]:
    """Filler sentences like `filler_sentences`, drawn in one batch: the generated long-context
    tasks hold millions of filler words a run, where a draw a word costs seconds of collection.
    (`filler_sentences` keeps its draws: the state-consistency prompts stay the same text.)"""
    drawn = rng.choices(_WORDS, k=max(0, words))
    sentences: list[str] = []
    start = 0
    while start < len(drawn):
        length = rng.randint(8, 16)
        sentences.append(" ".join(drawn[start : start + length]).capitalize() + ".")
        start += length
    return sentences


def long_document(*, words: int, seed: str, needle: str, copy_label: str) -> str:
    """About `words` words of filler with `needle` in the middle. The first line differs
    between copies so that two copies share no prompt prefix."""
    sentences = filler_sentences(random.Random(seed), words)
    sentences.insert(len(sentences) // 2, needle)
    return f"Archive record, {copy_label}.\n\n" + " ".join(sentences)


def needle_answer(text: str) -> str | None:
    """What a perfect reader answers to a retrieval question inside `text` (used by the
    reference simulator), or None when `text` asks no such question."""
    asked = _ASKED.search(text)
    if asked is None:
        return None
    found = re.search(re.escape(_NEEDLE.format(key=asked.group(1), value="\x00")).replace("\x00", "([^']*)"), text)
    return found.group(1) if found else None
