"""The simulator's tokenizer and the deterministic filler text it writes."""

from __future__ import annotations

import itertools
import random
import re

_WORD = re.compile(r"\s*\S+")
_OPENERS = ("First", "Next", "Then", "Also", "So", "Now", "Still", "Here", "Again", "Finally")
_SUBJECTS = ("the question", "this step", "the constraint", "the wording", "each option", "my estimate", "the answer")
_VERBS = ("suggests", "requires", "implies", "confirms", "narrows", "supports", "rules out", "points to")
_OBJECTS = (
    "a careful check",
    "the simplest reading",
    "one more pass",
    "the obvious candidate",
    "a quick sanity test",
    "the edge cases",
    "the expected format",
    "a short direct reply",
)


def count_tokens(text: str) -> int:
    """The simulator's tokenizer: one token per whitespace-separated word."""
    return len(text.split())


def take_tokens(text: str, limit: int) -> str:
    """The first `limit` tokens of `text`, keeping the original spacing between them."""
    end = 0
    for index, match in enumerate(_WORD.finditer(text)):
        if index == limit:
            break
        end = match.end()
    return text[:end]


def chunk_words(text: str, size: int) -> list[str]:
    """Pieces of about `size` words each that concatenate back to exactly `text`."""
    words = _WORD.findall(text)
    pieces = ["".join(words[start : start + size]) for start in range(0, len(words), size)]
    consumed = sum(map(len, pieces))
    if consumed < len(text):  # trailing whitespace has no word to attach to
        pieces.append(text[consumed:])
    return pieces


def reasoning_text(rng: random.Random, question: str, target_words: int) -> str:
    # K3's special tokens typed in a prompt are text, not structure: the simulated thinking quotes
    # them as a placeholder, so no parser, real or ours, takes a quoted prompt for K3 markup.
    quoted = " ".join("[marker]" if "<|" in word or "|>" in word else word for word in question.split()[:24])
    words = f'The user asks: "{quoted}". Let me think it through.'.split()
    # Whole sentences only, so the length overshoots the target by less than one sentence.
    while len(words) < target_words:
        sentence = f"{rng.choice(_OPENERS)}, {rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}."
        words.extend(sentence.split())
    return " ".join(words)


def _mean_bytes_per_word() -> float:
    # Every sentence shape is equally likely, so the mean over all of them is what
    # `reasoning_text` writes per word in the long run (one space counted per word).
    shapes = itertools.product(_OPENERS, _SUBJECTS, _VERBS, _OBJECTS)
    sentences = [f"{opener}, {subject} {verb} {object_}." for opener, subject, verb, object_ in shapes]
    return sum(len(sentence) + 1 for sentence in sentences) / sum(len(sentence.split()) for sentence in sentences)


_MEAN_BYTES_PER_WORD = _mean_bytes_per_word()


def words_for_bytes(target_bytes: int) -> int:
    """How many words `reasoning_text` needs, on average, to write about `target_bytes` bytes."""
    return max(1, round(target_bytes / _MEAN_BYTES_PER_WORD))


def generic_reply(rng: random.Random) -> str:
    return (
        "This reply comes from the k3conformance reference simulator, not from Kimi K3: "
        f"it has no fixture answer for this prompt (sample {rng.randrange(10**6):06d})."
    )


def wrong_variant(rng: random.Random, reply: str) -> str:
    """A plausible but wrong answer for graded items that do not provide one."""
    stripped = reply.strip()
    try:
        return str(int(stripped) + rng.choice((-2, -1, 1, 2)))
    except ValueError:
        pass
    if len(stripped) == 1 and stripped.isalpha() and stripped.isupper():
        letters = [letter for letter in "ABCD" if letter != stripped]
        return rng.choice(letters)
    flips = {"yes": "no", "no": "yes", "true": "false", "false": "true"}
    if stripped.lower() in flips:
        return flips[stripped.lower()]
    return f"Not {stripped}" if stripped else "unknown"
