"""Fixture answers the simulator knows, found by the prompt text embedded in a request."""

from __future__ import annotations

import ast
import functools
import json
import warnings
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from k3conformance.datasets.bundled import fixtures_dir
from k3conformance.datasets.pools import MANIFEST, load_pool
from k3conformance.reference.values import ExpectedToolCall, FixtureItem
from k3conformance.scoring.code_solutions import defines_function


def default_fixtures_dir() -> Path:
    return fixtures_dir()


class AnswerKey:
    def __init__(self, items: Iterable[FixtureItem]) -> None:
        self.items = tuple(items)
        # Suites wrap prompts in templates, so a prompt is found as a substring. To
        # avoid testing every prompt against every request, each prompt is filed
        # under one interior word: interior words survive any wrapping intact.
        self._by_anchor: dict[str, list[int]] = defaultdict(list)
        self._always_checked: list[int] = []
        for index, item in enumerate(self.items):
            interior = item.prompt.split()[1:-1]
            if interior:
                self._by_anchor[max(interior, key=len)].append(index)
            else:
                self._always_checked.append(index)
        self._cached_lookup = functools.lru_cache(maxsize=8192)(self._lookup)

    @classmethod
    def load(cls, directory: Path) -> AnswerKey:
        if not directory.is_dir():
            raise FileNotFoundError(f"fixtures directory not found: {directory}")
        items: list[FixtureItem] = []
        # Pools first: a pool's task may have the very prompt of a fixture's (HumanEval+ keeps
        # HumanEval's), and a tie goes to the earliest loaded, so the answer the simulator gives
        # that prompt is the pool's, whose builder checked it against the stronger tests.
        pools = directory / "pools"
        for manifest in sorted(pools.glob(f"*/{MANIFEST}")) if pools.is_dir() else ():
            items.extend(_pool_items(manifest.parent.name))
        for path in sorted(directory.glob("*.json")):
            items.extend(_parse_suite(path))
        return cls(items)

    def lookup(self, text: str) -> FixtureItem | None:
        """The item whose prompt occurs in `text`; the longest prompt wins."""
        return self._cached_lookup(text)

    def _lookup(self, text: str) -> FixtureItem | None:
        candidates = list(self._always_checked)
        for word in set(text.split()):
            candidates.extend(self._by_anchor.get(word, ()))
        matches = [i for i in candidates if self.items[i].prompt and self.items[i].prompt in text]
        # Ties go to the earliest loaded item so the choice never depends on set order.
        best = min(matches, key=lambda i: (-len(self.items[i].prompt), i), default=None)
        return None if best is None else self.items[best]


def _parse_suite(path: Path) -> list[FixtureItem]:
    document = json.loads(path.read_text(encoding="utf-8"))
    suite = str(document.get("suite", path.stem))
    try:
        return [_parse_item(suite, raw) for raw in document["items"]]
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{path}: malformed fixture: {error!r}") from error


def _parse_item(suite: str, raw: Mapping[str, Any]) -> FixtureItem:
    simulator: Mapping[str, Any] = raw.get("simulator") or {}
    calls = tuple(
        ExpectedToolCall(name=str(call["name"]), arguments=dict(call.get("arguments", {})))
        for call in simulator.get("tool_calls", ())
    )
    wrong = simulator.get("wrong_reply")
    return FixtureItem(
        suite=suite,
        id=str(raw["id"]),
        prompt=str(raw["prompt"]),
        answer=raw.get("answer"),
        reply=str(simulator["reply"]) if "reply" in simulator else _answer_text(raw["answer"]),
        wrong_reply=None if wrong is None else str(wrong),
        graded=bool(simulator.get("graded", True)),
        tool_calls=calls,
    )


def _pool_items(name: str) -> list[FixtureItem]:
    """A pool's items as the simulator answers them, for the suites whose answers a reply holds:
    math (the worked solution when right, a wrong integer boxed when wrong) and coding (the
    canonical solution when right, the prompt with `return None` as its body when wrong); each
    pool's builder checked that the suite scores both so. Pools of other suites carry their
    answer keys in their own form (agentic tasks, say)."""
    pool = load_pool(name)
    if pool.suite == "math":
        return [_math_item(pool.suite, item) for item in pool.items]
    if pool.suite == "coding":
        return [_coding_item(pool.suite, item) for item in pool.items]
    return []


def _math_item(suite: str, item: Mapping[str, Any]) -> FixtureItem:
    return FixtureItem(
        suite=suite,
        id=str(item["id"]),
        prompt=str(item["prompt"]),
        answer=item["answer"],
        reply=str(item.get("solution") or f"The final answer is $\\boxed{{{item['answer']}}}$."),
        wrong_reply=f"The final answer is $\\boxed{{{wrong_math_answer(str(item['answer']))}}}$.",
        graded=True,
        tool_calls=(),
    )


def _coding_item(suite: str, item: Mapping[str, Any]) -> FixtureItem:
    # Filed under the stripped prompt, as fixtures/humaneval_answers.json files HumanEval's.
    return FixtureItem(
        suite=suite,
        id=str(item["id"]),
        prompt=str(item["prompt"]).strip(),
        answer=item["entry_point"],
        reply=f"```python\n{item['solution']}```",
        wrong_reply=f"```python\n{wrong_solution(item)}```",
        graded=True,
        tool_calls=(),
    )


def wrong_code_answer(prompt: str) -> str:
    """A HumanEval-style prompt completed with a body that returns None: wrong for every task
    whose tests expect a value (a pool's builder keeps no task this passes)."""
    return f"{prompt}    return None\n"


def wrong_solution(task: Mapping[str, Any]) -> str:
    """The simulator's wrong answer to a coding pool's task: where the prompt opens the function
    (HumanEval's signature and docstring), the prompt completed with `return None`; where it
    only describes it (MBPP's description and an example assert), the canonical solution with
    the entry point's body replaced by `return None`, its signature kept so that the tests call
    it and fail on what it returns (a pool's builder keeps no task this passes)."""
    prompt, entry_point = str(task["prompt"]), str(task["entry_point"])
    if defines_function(prompt, entry_point):
        return wrong_code_answer(prompt)
    solution = str(task["solution"])
    with warnings.catch_warnings():
        # Some canonical solutions' regexes are in plain strings ('\w'): parsing them warns.
        warnings.simplefilter("ignore", (DeprecationWarning, SyntaxWarning))
        module = ast.parse(solution)
    for statement in module.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)) and statement.name == entry_point:
            lines = solution.splitlines(keepends=True)
            first = statement.body[0]
            if first.lineno == statement.lineno:  # `def f(x): return x` on one line
                header = lines[first.lineno - 1][: first.col_offset].rstrip()
                return "".join(lines[: first.lineno - 1]) + f"{header}\n    return None\n"
            indent = " " * first.col_offset
            return "".join(lines[: first.lineno - 1]) + f"{indent}return None\n"
    return wrong_code_answer(prompt)


def wrong_math_answer(gold: str) -> str:
    """An integer the gold is not."""
    return "7907" if gold.strip() == "7919" else "7919"


def _answer_text(answer: Any) -> str:
    # Structured answers are written as JSON rather than Python's repr, so a JSON reader can parse them.
    return json.dumps(answer, ensure_ascii=False) if isinstance(answer, (dict, list)) else str(answer)
