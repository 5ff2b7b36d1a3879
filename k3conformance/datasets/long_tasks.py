"""Long-context tasks generated in the manner of RULER (NVIDIA/RULER, Apache-2.0, read at
c3f5e3b: scripts/data/synthetic/niah.py, variable_tracking.py, common_words_extraction.py and
the multi-hop idea of its qa task). Written here, not copied: the prompts follow RULER's
templates in spirit, the filler and the word lists are this project's own, so nothing is
downloaded and no data file ships: the items are a pure function of (generator version,
seed, length, index).

Four kinds, one in four items each (`KINDS`), every one answered with a set scored by set
equality (a single-answer kind is a set of one):

- `multi_key`: several keys with special magic numbers among distractor keys (some sharing a
  key's word, some keys holding two numbers); one to three keys asked at once, every number
  of every asked key is the answer (RULER's niah multikey, multivalue and multiquery).
- `variable_tracking`: chains of assignments `VAR ABCDE = 12345.` … `VAR FGHIJ = VAR ABCDE.`
  spread through the filler, a distractor chain beside the asked one, branching as it goes;
  the answer is every variable holding the asked value (RULER's vt).
- `common_words`: a numbered list of generated words, five of them repeated thirty times and
  the rest one to three times; the answer is the five most common (RULER's cwe).
- `multi_hop`: facts about generated people, firms, cities and provinces spread through the
  filler; a question chains three or four of them to a province's postal code, among
  distractor facts about the other entities.

Lengths are counted with the plugin's token estimate (`estimated_tokens`: 1.3 tokens a
whitespace-separated word, as long_prompts.py builds its filler), the same estimate for
every kind; each item records its measured estimate.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from k3conformance.datasets.long_prompts import TOKENS_PER_WORD, quick_filler

__all__ = [
    "GENERATOR",
    "KINDS",
    "LongTask",
    "answer_pattern",
    "estimated_tokens",
    "long_task",
    "long_tasks",
    "tasks_sha256",
]

# Bumped whenever a change to this module changes any item: the version is part of the
# dataset's name, so a baseline made with another generator is told apart from this one.
GENERATOR = "ruler-style-v1"
KINDS = ("multi_key", "variable_tracking", "common_words", "multi_hop")

# The prompts' fixed phrases. The simulator's reader (reference/long_reader.py) parses the
# prompts with them and computes its answers from the text alone.
NUMBER_NEEDLE = "One of the special magic numbers for {key} is: {value}."
NUMBER_QUESTION = (
    "What are all the special magic numbers for {keys} mentioned in the provided text? "
    "Answer with every such number, separated by commas."
)
ASSIGN_VALUE = "VAR {name} = {value}."
ASSIGN_VAR = "VAR {name} = VAR {source}."
VARIABLE_QUESTION = (
    "Question: Find all variables that are assigned the value {value} in the text above. "
    "Answer with the variable names only, separated by commas."
)
WORDS_QUESTION = (
    "Question: What are the {count} most common words in the above list? "
    "Answer with the words only, separated by commas."
)
WORKS = "{person} works for the firm {firm}."
FIRM = "The firm {firm} is based in the city of {city}."
PERSON_CITY = "{person} lives in the city of {city}."
CITY = "The city of {city} lies in the province of {province}."
PROVINCE = "The province of {province} has the postal code {code}."
HOP_QUESTIONS = {
    3: "What is the postal code of the province of the city where {person} lives?",
    4: "What is the postal code of the province of the city where the firm {person} works for is based?",
}
HOP_SUFFIX = " Answer with the postal code only."

_PREAMBLES = {
    "multi_key": (
        "Some special magic numbers are hidden within the following text. Make sure to memorize "
        "them. I will quiz you about the numbers afterwards."
    ),
    "variable_tracking": "Memorize and track the chain(s) of variable assignment hidden in the following text.",
    "common_words": (
        "Below is a numbered list of words. In these words, some appear more often than others. "
        "Memorize the ones that appear most often."
    ),
    "multi_hop": (
        "The following text holds facts about people, firms, cities and provinces. Read it and "
        "answer the question after it."
    ),
}

# What an answer of each kind looks like: the scorer takes every match in the reply and
# compares the set with the expected one.
_PATTERNS = {
    "multi_key": re.compile(r"\b\d{7}\b"),
    "variable_tracking": re.compile(r"\b[A-Z]{5}\b"),
    "common_words": re.compile(r"\b(?:[bdfgklmnprstvz][aeiou]){3}\b"),
    "multi_hop": re.compile(r"\b\d{5}\b"),
}
_CONSONANTS = "bdfgklmnprstvz"
_VOWELS = "aeiou"
_SYLLABLES = tuple(consonant + vowel for consonant in _CONSONANTS for vowel in _VOWELS)
_COMMON_WORDS = 5
_COMMON_REPEATS = 30
_UNCOMMON_REPEATS = (1, 3)
_KEY_WORDS = ("copper", "harbor", "lantern", "orchard", "meridian", "signal", "granite", "beacon", "summit", "timber")


@dataclass(frozen=True)
class LongTask:
    id: str
    kind: str
    prompt: str
    answers: tuple[str, ...]  # sorted; the reply must name exactly these
    estimated_tokens: int


def estimated_tokens(text: str) -> int:
    """The plugin's token estimate of `text`."""
    return round(len(text.split()) * TOKENS_PER_WORD)


def answer_pattern(kind: str) -> re.Pattern[str]:
    return _PATTERNS[kind]


def long_tasks(tokens: int, count: int, seed: str) -> list[LongTask]:
    """`count` tasks of about `tokens` tokens each, the kinds in turn."""
    return [long_task(tokens, index, seed) for index in range(count)]


def tasks_sha256(tasks: list[LongTask]) -> str:
    """The content hash of a set of tasks (the dataset hash of a length's suite): what a
    baseline and a candidate must share, whatever produced it."""
    digest = hashlib.sha256()
    for task in tasks:
        fields = [task.id, task.kind, hashlib.sha256(task.prompt.encode()).hexdigest(), list(task.answers)]
        digest.update(json.dumps(fields).encode() + b"\n")
    return digest.hexdigest()


@lru_cache(maxsize=1024)
def long_task(tokens: int, index: int, seed: str) -> LongTask:
    kind = KINDS[index % len(KINDS)]
    rng = random.Random(f"{GENERATOR}/{seed}/{tokens}/{index}")
    # The words left for the context once the preamble and the question are counted.
    words = max(200, int(tokens / TOKENS_PER_WORD) - 60)
    context, question, answers = _BUILDERS[kind](rng, words)
    prompt = f"{_PREAMBLES[kind]}\n\n{context}\n\n{question}"
    item = f"{tokens // 1000}k-{index}"
    return LongTask(item, kind, prompt, tuple(sorted(answers)), estimated_tokens(prompt))


def _pseudo_word(rng: random.Random, syllables: int = 3) -> str:
    return "".join(rng.choice(_CONSONANTS) + rng.choice(_VOWELS) for _ in range(syllables))


def _distinct(rng: random.Random, count: int, draw: Callable[[random.Random], str]) -> list[str]:
    """`count` different draws, in the order first drawn."""
    seen: dict[str, None] = {}
    while len(seen) < count:
        seen.setdefault(draw(rng), None)
    return list(seen)


def _scatter(rng: random.Random, sentences: list[str], inserts: list[str]) -> str:
    """`inserts` placed at random depths of the filler, in their given order."""
    positions = sorted(rng.randrange(len(sentences) + 1) for _ in inserts)
    for offset, (position, text) in enumerate(zip(positions, inserts, strict=True)):
        sentences.insert(position + offset, text)
    return " ".join(sentences)


def _multi_key(rng: random.Random, words: int) -> tuple[str, str, list[str]]:
    asked_count = rng.randint(1, 3)
    keys = _distinct(rng, 8, lambda r: f"{r.choice(_KEY_WORDS)}-{r.randint(100, 999)}")
    values = _distinct(rng, 16, lambda r: str(r.randint(1_000_000, 9_999_999)))
    asked = keys[:asked_count]
    needles: list[tuple[str, str]] = []
    for key in keys:
        held = 2 if rng.random() < 0.4 else 1
        needles.extend((key, values.pop()) for _ in range(held))
    rng.shuffle(needles)
    answers = [value for key, value in needles if key in asked]
    sentences = quick_filler(rng, words - 12 * len(needles))
    context = _scatter(rng, sentences, [NUMBER_NEEDLE.format(key=key, value=value) for key, value in needles])
    named = asked[0] if len(asked) == 1 else ", ".join(asked[:-1]) + f" and {asked[-1]}"
    return context, NUMBER_QUESTION.format(keys=named), answers


def _variable_tracking(rng: random.Random, words: int) -> tuple[str, str, list[str]]:
    hops = [rng.randint(3, 5), rng.randint(3, 5)]
    names = _distinct(rng, sum(hops) + 2, lambda r: "".join(r.choices("ABCDEFGHIJKLMNOPQRSTUVWXYZ", k=5)))
    values = _distinct(rng, 2, lambda r: str(r.randint(10_000, 99_999)))
    chains: list[list[str]] = []
    members: list[list[str]] = []
    start = 0
    for chain, hop_count in enumerate(hops):
        chain_names = names[start : start + hop_count + 1]
        start += hop_count + 1
        lines = [ASSIGN_VALUE.format(name=chain_names[0], value=values[chain])]
        # Each later variable copies one held before it: mostly the latest, sometimes an
        # earlier one, so the chain branches.
        for position in range(1, len(chain_names)):
            source = chain_names[position - 1] if rng.random() < 0.7 else rng.choice(chain_names[:position])
            lines.append(ASSIGN_VAR.format(name=chain_names[position], source=source))
        chains.append(lines)
        members.append(chain_names)
    # The two chains interleave, each in its own order (RULER's shuffle_sublists_heap).
    merged: list[str] = []
    cursors = [0, 0]
    while any(cursor < len(lines) for cursor, lines in zip(cursors, chains, strict=True)):
        open_chains = [chain for chain in (0, 1) if cursors[chain] < len(chains[chain])]
        chain = rng.choice(open_chains)
        merged.append(chains[chain][cursors[chain]])
        cursors[chain] += 1
    sentences = quick_filler(rng, words - 5 * len(merged))
    context = _scatter(rng, sentences, merged)
    return context, VARIABLE_QUESTION.format(value=values[0]), members[0]


def _common_words(rng: random.Random, words: int) -> tuple[str, str, list[str]]:
    # Each entry "12. word" is two whitespace-separated words.
    entries = max(_COMMON_WORDS * _COMMON_REPEATS * 2, words // 2)
    uncommon_entries = entries - _COMMON_WORDS * _COMMON_REPEATS
    low, high = _UNCOMMON_REPEATS
    # Enough distinct words for the uncommon entries at the fewest repeats, drawn as indices
    # into every three-syllable word (one batch: a 128K list holds about 25,000 of them).
    indices = rng.sample(range(len(_SYLLABLES) ** 3), _COMMON_WORDS + uncommon_entries // low)
    vocabulary = [_SYLLABLES[i // 4900] + _SYLLABLES[i // 70 % 70] + _SYLLABLES[i % 70] for i in indices]
    common, uncommon = vocabulary[:_COMMON_WORDS], vocabulary[_COMMON_WORDS:]
    listed = [word for word in common for _ in range(_COMMON_REPEATS)]
    for word, repeats in zip(uncommon, rng.choices(range(low, high + 1), k=len(uncommon)), strict=True):
        if len(listed) >= entries:
            break
        listed.extend([word] * min(repeats, entries - len(listed)))
    rng.shuffle(listed)
    context = " ".join(f"{number}. {word}" for number, word in enumerate(listed, start=1))
    return context, WORDS_QUESTION.format(count=_COMMON_WORDS), common


def _multi_hop(rng: random.Random, words: int) -> tuple[str, str, list[str]]:
    hops = rng.choice((3, 4))
    names = _distinct(rng, 24, lambda r: _pseudo_word(r, r.choice((2, 3))).capitalize())
    people = [f"{names[i]} {names[i + 1]}" for i in range(0, 12, 2)]
    firms, cities, provinces = names[12:16], names[16:21], names[21:24]
    codes = _distinct(rng, len(provinces), lambda r: str(r.randint(10_000, 99_999)))
    facts = [PROVINCE.format(province=province, code=code) for province, code in zip(provinces, codes, strict=True)]
    city_province = {city: rng.choice(provinces) for city in cities}
    facts += [CITY.format(city=city, province=province) for city, province in city_province.items()]
    firm_city = {firm: rng.choice(cities) for firm in firms}
    facts += [FIRM.format(firm=firm, city=city) for firm, city in firm_city.items()]
    # Half the people have a city of their own, half work for a firm.
    person_city: dict[str, str] = {}
    person_firm: dict[str, str] = {}
    for position, person in enumerate(people):
        if position % 2 == 0:
            person_city[person] = rng.choice(cities)
            facts.append(PERSON_CITY.format(person=person, city=person_city[person]))
        else:
            person_firm[person] = rng.choice(firms)
            facts.append(WORKS.format(person=person, firm=person_firm[person]))
    rng.shuffle(facts)
    if hops == 3:
        person = rng.choice(list(person_city))
        city = person_city[person]
    else:
        person = rng.choice(list(person_firm))
        city = firm_city[person_firm[person]]
    answer = codes[provinces.index(city_province[city])]
    sentences = quick_filler(rng, words - 10 * len(facts))
    context = _scatter(rng, sentences, facts)
    return context, HOP_QUESTIONS[hops].format(person=person) + HOP_SUFFIX, [answer]


_BUILDERS = {
    "multi_key": _multi_key,
    "variable_tracking": _variable_tracking,
    "common_words": _common_words,
    "multi_hop": _multi_hop,
}
