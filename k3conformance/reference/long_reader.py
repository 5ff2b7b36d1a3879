"""The simulator reading a generated long-context task (datasets/long_tasks.py): what a perfect
reader answers, computed from the prompt's text alone, never from the generator's records or
the suite's name, and a plausible wrong answer for when the item's draw says it misses.

The wrong answer is the kind of miss a long-context reader makes: one asked value swapped
for a distractor of the same shape found in the same prompt (another key's number, a
variable of the other chain, the next most common word, another province's code).
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections import Counter
from dataclasses import dataclass

from k3conformance.datasets import long_tasks as tasks

__all__ = ["LongAnswer", "read_long_task"]


@dataclass(frozen=True)
class LongAnswer:
    kind: str
    answers: tuple[str, ...]  # sorted
    distractor: str  # same shape as an answer, not one of them
    # The item's difficulty key: from the whole prompt, so that every item, at every length,
    # has a difficulty of its own (the questions' wording repeats across items).
    key: str = ""

    def reply(self, right: bool) -> str:
        values = list(self.answers) if right else [*self.answers[:-1], self.distractor]
        return ", ".join(values)


def _template(template: str, **groups: str) -> re.Pattern[str]:
    """A regex matching `template` with each named field as the given group."""
    pattern = re.escape(template)
    for name, group in groups.items():
        pattern = pattern.replace(re.escape("{" + name + "}"), group)
    return re.compile(pattern)


_NUMBER_QUESTION = _template(tasks.NUMBER_QUESTION, keys="(.+?)")
_NUMBER_NEEDLE = _template(tasks.NUMBER_NEEDLE, key=r"(\S+)", value=r"(\d+)")
_VARIABLE_QUESTION = _template(tasks.VARIABLE_QUESTION, value=r"(\d+)")
_ASSIGNMENT = re.compile(r"VAR ([A-Z]{5}) = (?:VAR ([A-Z]{5})|(\d+))\.")
_WORDS_QUESTION = _template(tasks.WORDS_QUESTION, count=r"(\d+)")
_LIST_ENTRY = re.compile(r"\b\d+\. ([a-z]+)\b")
_HOP_QUESTIONS = {hops: _template(question, person="(.+?)") for hops, question in tasks.HOP_QUESTIONS.items()}
_NAME = r"([A-Z][a-z]+(?: [A-Z][a-z]+)?)"
_FACTS = {
    "works": _template(tasks.WORKS, person=_NAME, firm=_NAME),
    "firm": _template(tasks.FIRM, firm=_NAME, city=_NAME),
    "person": _template(tasks.PERSON_CITY, person=_NAME, city=_NAME),
    "city": _template(tasks.CITY, city=_NAME, province=_NAME),
    "province": _template(tasks.PROVINCE, province=_NAME, code=r"(\d+)"),
}
# The question sits at the end of the prompt: look for it there, not through 600 KB.
_TAIL = 600


def read_long_task(text: str) -> LongAnswer | None:
    """The answer to the generated long-context task in `text`, or None when it holds none."""
    read = _read(text)
    if read is None:
        return None
    return dataclasses.replace(read, key=f"long/{read.kind}/{hashlib.sha256(text.encode()).hexdigest()[:16]}")


def _read(text: str) -> LongAnswer | None:
    tail = text[-_TAIL:]
    if match := _NUMBER_QUESTION.search(tail):
        return _multi_key(text, match.group(1))
    if match := _VARIABLE_QUESTION.search(tail):
        return _variables(text, match.group(1))
    if match := _WORDS_QUESTION.search(tail):
        return _common_words(text, int(match.group(1)))
    for hops, question in _HOP_QUESTIONS.items():
        if match := question.search(tail):
            return _multi_hop(text, match.group(1), via_firm=hops == 4)
    return None


def _multi_key(text: str, named: str) -> LongAnswer | None:
    asked = set(re.split(r", | and ", named))
    found = _NUMBER_NEEDLE.findall(text)
    answers = sorted({value for key, value in found if key in asked})
    others = [value for key, value in found if key not in asked]
    if not answers or not others:
        return None
    return LongAnswer("multi_key", tuple(answers), others[0])


def _variables(text: str, value: str) -> LongAnswer | None:
    held: dict[str, str] = {}
    copies: list[tuple[str, str]] = []
    for name, source, number in _ASSIGNMENT.findall(text):
        if number:
            held[name] = number
        else:
            copies.append((name, source))
    # Follow the copies until nothing changes: the text's order is the chains' order, but a
    # reader does not rely on it.
    changed = True
    while changed:
        changed = False
        for name, source in copies:
            if source in held and held.get(name) != held[source]:
                held[name] = held[source]
                changed = True
    answers = sorted(name for name, number in held.items() if number == value)
    others = sorted(name for name, number in held.items() if number != value)
    if not answers or not others:
        return None
    return LongAnswer("variable_tracking", tuple(answers), others[0])


def _common_words(text: str, count: int) -> LongAnswer | None:
    ranked = Counter(_LIST_ENTRY.findall(text)).most_common(count + 1)
    if len(ranked) <= count or ranked[count - 1][1] == ranked[count][1]:
        return None  # no list, or no clear top `count`
    return LongAnswer("common_words", tuple(sorted(word for word, _ in ranked[:count])), ranked[count][0])


def _multi_hop(text: str, person: str, *, via_firm: bool) -> LongAnswer | None:
    facts = {name: dict(pattern.findall(text)) for name, pattern in _FACTS.items()}
    city = facts["firm"].get(facts["works"].get(person, "")) if via_firm else facts["person"].get(person)
    province = facts["city"].get(city or "")
    code = facts["province"].get(province or "")
    others = [other for name, other in facts["province"].items() if name != province]
    if code is None or not others:
        return None
    return LongAnswer("multi_hop", (code,), others[0])
