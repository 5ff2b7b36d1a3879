"""Items a very small real model (SmolLM2-135M-Instruct on llama.cpp) can be measured on:
questions with one verifiable answer that it gets right part of the time, and long answers
(counting, multiples) where its loops show.

Generated, not stored: `generate_items(seed)` draws the same items for the same seed on
every machine (a `random.Random(seed)` walks the templates in a fixed order), and
`items_digest` hashes them, so a run records which items it asked (`GENERATOR_SEED`, the
digest). The templates were chosen by what the model does with them at temperature 0
(docs/real-engine.md): one-digit sums it mostly gets, subtraction, products and "what comes
after" it mostly misses, comparisons it gets about half the time.

Long items are where SmolLM2's own loops show (a list whose last line repeats until the
budget ends, the week coming round again, "Apple 5 times:" line after line): a day run, a
list of distinct things, a word written N times, counting and multiples.

Short items end with "Answer with a number only." where the bare question makes the model
lecture until the budget ends; the answer is scored by the math suite's last-number
extraction. Long items ask for a run of numbers and are scored on the whole run.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass

__all__ = [
    "DAYS",
    "GENERATOR_SEED",
    "LONG_KINDS",
    "LONG_RULES",
    "SHORT_KINDS",
    "SmallModelItem",
    "generate_items",
    "items_digest",
]

# The seed of the items the suite runs; changing it changes every item (and the digest).
GENERATOR_SEED = 20261201
NUMBER_ONLY = " Answer with a number only."


@dataclass(frozen=True)
class SmallModelItem:
    id: str
    kind: str
    prompt: str
    # A number for short items; for long ones what LONG_RULES[kind] checks: the expected
    # run (comma-separated), the number of lines, or "WORD COUNT".
    answer: str
    long: bool


Question = tuple[str, str]  # prompt, answer


def _add_one_digit(rng: random.Random) -> Question:
    a, b = rng.randint(1, 9), rng.randint(1, 9)
    return f"What is {a} + {b}?", str(a + b)


def _add_two_digit(rng: random.Random) -> Question:
    a, b = rng.randint(10, 49), rng.randint(10, 49)
    return f"What is {a} + {b}?{NUMBER_ONLY}", str(a + b)


def _subtract(rng: random.Random) -> Question:
    a = rng.randint(5, 20)
    b = rng.randint(1, a - 1)
    return f"What is {a} - {b}?{NUMBER_ONLY}", str(a - b)


def _multiply(rng: random.Random) -> Question:
    a, b = rng.randint(2, 9), rng.randint(2, 9)
    return f"What is {a} times {b}?{NUMBER_ONLY}", str(a * b)


def _larger(rng: random.Random) -> Question:
    a, b = rng.sample(range(1, 100), 2)
    return f"Which is larger, {a} or {b}?{NUMBER_ONLY}", str(max(a, b))


def _smallest_of_three(rng: random.Random) -> Question:
    numbers = rng.sample(range(1, 30), 3)
    return f"What is the smallest of {numbers[0]}, {numbers[1]} and {numbers[2]}?", str(min(numbers))


def _next_number(rng: random.Random) -> Question:
    n = rng.randint(5, 99)
    return f"What number comes after {n}?{NUMBER_ONLY}", str(n + 1)


def _count_from(rng: random.Random) -> Question:
    start = rng.randint(1, 40)
    stop = start + rng.randint(15, 30)
    return (
        f"Count from {start} to {stop}, separated by commas.",
        ", ".join(str(n) for n in range(start, stop + 1)),
    )


def _multiples(rng: random.Random) -> Question:
    step = rng.randint(2, 9)
    count = rng.randint(10, 15)
    return (
        f"List the first {count} multiples of {step}, separated by commas.",
        ", ".join(str(step * n) for n in range(1, count + 1)),
    )


def _days_from(rng: random.Random) -> Question:
    start = rng.randrange(7)
    days = [DAYS[(start + offset) % 7] for offset in range(7)]
    return f"List the seven days of the week, starting with {days[0]}.", ", ".join(days)


def _list_things(rng: random.Random) -> Question:
    count = rng.randint(3, 10)
    things = rng.choice(("animals", "fruits", "colours", "countries", "cities", "vegetables", "sports", "birds"))
    return f"List {count} {things}, one per line.", str(count)


def _repeat_word(rng: random.Random) -> Question:
    word = rng.choice(("apple", "blue", "cat", "river", "sun", "table", "green", "house"))
    count = rng.randint(3, 8)
    return f"Write the word {word} {count} times.", f"{word} {count}"


DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
# How each long kind's answer is scored (k3conformance/scoring/long_answers.py).
LONG_RULES = {
    "count-from": "number-run",
    "multiples": "number-run",
    "days-from": "word-run",
    "list-things": "distinct-lines",
    "repeat-word": "word-count",
}

# Kind -> (template, items per generated set). Counts make the short mix land near half
# right for SmolLM2-135M at temperature 0 (measured, docs/real-engine.md).
SHORT_KINDS: dict[str, tuple[Callable[[random.Random], Question], int]] = {
    "add-one-digit": (_add_one_digit, 50),
    "add-two-digit": (_add_two_digit, 40),
    "subtract": (_subtract, 40),
    "multiply": (_multiply, 30),
    "larger": (_larger, 40),
    "smallest-of-three": (_smallest_of_three, 30),
    "next-number": (_next_number, 20),
}
LONG_KINDS: dict[str, tuple[Callable[[random.Random], Question], int]] = {
    "count-from": (_count_from, 20),
    "multiples": (_multiples, 15),
    "days-from": (_days_from, 7),
    "list-things": (_list_things, 30),
    "repeat-word": (_repeat_word, 20),
}


def generate_items(seed: int = GENERATOR_SEED) -> list[SmallModelItem]:
    """The item set of `seed`: every kind's items in a fixed order, duplicates redrawn."""
    rng = random.Random(seed)
    items: list[SmallModelItem] = []
    for long, kinds in ((False, SHORT_KINDS), (True, LONG_KINDS)):
        for kind, (template, count) in kinds.items():
            seen: set[str] = set()
            while len(seen) < count:
                prompt, answer = template(rng)
                if prompt in seen:
                    continue
                seen.add(prompt)
                items.append(SmallModelItem(f"{kind}-{len(seen):03d}", kind, prompt, answer, long))
    return items


def items_digest(items: list[SmallModelItem]) -> str:
    """SHA-256 of the items as JSON: two runs with equal digests asked the same questions."""
    text = json.dumps([asdict(item) for item in items], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()
