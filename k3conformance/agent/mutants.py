"""Bugs put into real code, in the manner of SWE-smith: one small change to one function.

Each mutant changes one node of one function's source text and nothing else (the rest of the
file, its comments and its layout stay byte for byte), so the reference solution is the
original function and the fix is a one-place edit. The kinds (`BUG_KINDS`):

- `operator swap`: an arithmetic, bitwise, boolean or equality operator replaced (`+` by
  `-`, `and` by `or`, `==` by `!=`, `in` by `not in`, `is` by `is not`);
- `off-by-one`: an integer constant one larger, or a strict comparison made non-strict (and
  back);
- `condition negation`: the test of an `if`, `while` or conditional expression negated;
- `dropped branch`: an `else`/`elif` branch or a guard clause (an `if` whose body returns,
  raises, breaks or continues) removed;
- `swapped arguments`: the first two positional arguments of a call swapped.

Beside them, bugs the project really had (`reverted fix`, `reverted_fix`): a fix from the
project's history, taken back out of the pinned release where the fix's lines are still there
as it wrote them, all in one function (the manner of SWE-bench: the state before a real fix).

Two mutants of one project in two different files make one task too (`two files`): the report
gives both symptoms, and the fix spans both files.

Whether a mutant is a task is for the project's own tests to say (the pool builder keeps
only those that fail at least one test the original passes); this module only proposes.
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

BUG_KINDS = ("operator swap", "off-by-one", "condition negation", "dropped branch", "swapped arguments")

_OPERATORS: dict[type[ast.AST], Any] = {
    ast.Add: ast.Sub(),
    ast.Sub: ast.Add(),
    ast.Mult: ast.Add(),
    ast.FloorDiv: ast.Mult(),
    ast.Mod: ast.FloorDiv(),
    ast.LShift: ast.RShift(),
    ast.RShift: ast.LShift(),
    ast.BitAnd: ast.BitOr(),
    ast.BitOr: ast.BitAnd(),
    ast.Eq: ast.NotEq(),
    ast.NotEq: ast.Eq(),
    ast.In: ast.NotIn(),
    ast.NotIn: ast.In(),
    ast.Is: ast.IsNot(),
    ast.IsNot: ast.Is(),
}
_BOUNDARIES: dict[type[ast.AST], Any] = {ast.Lt: ast.LtE(), ast.LtE: ast.Lt(), ast.Gt: ast.GtE(), ast.GtE: ast.Gt()}
_GUARD_EXITS = (ast.Return, ast.Raise, ast.Break, ast.Continue)


@dataclass(frozen=True)
class Mutant:
    path: str
    function: str  # qualified name, Class.method
    kind: str
    detail: str  # what changed, e.g. "`<` to `<=` on line 42"
    line: int
    original: str  # the function's source as the project has it
    mutated: str  # the same function with the bug

    @property
    def key(self) -> str:
        """A stable name for ordering and ids."""
        return hashlib.sha256(f"{self.path}\0{self.function}\0{self.detail}".encode()).hexdigest()


def mutants(path: str, source: str) -> list[Mutant]:
    """Every mutant this module proposes for `source` (the file at `path`), in source order."""
    lines = source.splitlines(keepends=True)
    found: list[Mutant] = []
    for qualname, function in _functions(ast.parse(source)):
        first, last = function.lineno, function.end_lineno or function.lineno
        if function.decorator_list:
            first = min(decorator.lineno for decorator in function.decorator_list)
        original = "".join(lines[first - 1 : last])
        if source.count(original) != 1:
            continue
        for kind, detail, line, edited in _edits(function, lines, first):
            mutated = "".join(edited)
            if mutated == original or not _parses(source.replace(original, mutated)):
                continue
            found.append(Mutant(path, qualname, kind, f"{detail} on line {line}", line, original, mutated))
    return found


REVERTED_FIX = "reverted fix"
# A task of two of the project's bugs, each in its own file (the pool builder's pairs of mutants):
# the hidden tests pass only once both are fixed, each alone being a validated task.
TWO_FILES = "two files"


def reverted_fix(path: str, source: str, hunks: Sequence[tuple[str, str]], detail: str) -> Mutant | None:
    """The function of `source` (the file at `path`) that a real fix from the project's history
    changed, put back as it was before the fix: `hunks` are the fix's (before, after) texts in this
    file, context lines included. None unless every after-text occurs once in the file, all of
    them inside one function, and the file with that function reverted still parses."""
    lines = source.splitlines(keepends=True)
    functions: list[tuple[str, int, str]] = []
    for qualname, function in _functions(ast.parse(source)):
        first = min([decorator.lineno for decorator in function.decorator_list] + [function.lineno])
        functions.append((qualname, first, "".join(lines[first - 1 : function.end_lineno or function.lineno])))
    owner: tuple[str, int, str] | None = None
    mutated = ""
    for before, after in hunks:
        if not after.strip() or source.count(after) != 1:
            return None
        holders = [function for function in functions if after in function[2]]
        if len(holders) != 1 or (owner is not None and holders[0][0] != owner[0]):
            return None
        if owner is None:
            owner, mutated = holders[0], holders[0][2]
        mutated = mutated.replace(after, before)
    if owner is None or mutated == owner[2] or source.count(owner[2]) != 1:
        return None
    if not _parses(source.replace(owner[2], mutated)):
        return None
    return Mutant(path, owner[0], REVERTED_FIX, detail, owner[1], owner[2], mutated)


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except SyntaxError:
        return False
    return True


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Top-level functions and methods of top-level classes (nested functions belong to theirs)."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    yield f"{node.name}.{item.name}", item


def _own_nodes(function: ast.AST) -> Iterator[ast.AST]:
    """The function's nodes, its docstring and nested definitions left out."""
    body = getattr(function, "body", [])
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant):
        body = body[1:]
    pending: list[ast.AST] = list(reversed(body))
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        yield node
        pending.extend(reversed(list(ast.iter_child_nodes(node))))


Edit = tuple[str, str, int, list[str]]


def _edits(function: ast.AST, lines: list[str], first: int) -> Iterator[Edit]:
    """(kind, detail, line, the function's lines edited) for every change proposed in it."""
    last = getattr(function, "end_lineno", first)
    own = lines[first - 1 : last]
    for node in _own_nodes(function):
        for kind, detail, replacement in _expression_changes(node):
            edited = _replace_segment(own, first, node, replacement)
            if edited is not None:
                yield kind, detail, node.lineno, edited  # type: ignore[attr-defined]
        for kind, detail, start, end in _dropped(node):
            yield kind, detail, start, own[: start - first] + own[end - first + 1 :]


def _expression_changes(node: ast.AST) -> Iterator[tuple[str, str, str]]:
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        if not (isinstance(node.op, ast.Mod) and isinstance(node.left, ast.Constant)):  # string formatting
            swapped = ast.BinOp(node.left, _OPERATORS[type(node.op)], node.right)
            yield "operator swap", f"{_symbol(node.op)} to {_symbol(swapped.op)}", ast.unparse(swapped)
    elif isinstance(node, ast.BoolOp):
        other: ast.boolop = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield "operator swap", f"{_symbol(node.op)} to {_symbol(other)}", ast.unparse(ast.BoolOp(other, node.values))
    elif isinstance(node, ast.Compare) and len(node.ops) == 1:
        operator = type(node.ops[0])
        table, kind = (_BOUNDARIES, "off-by-one") if operator in _BOUNDARIES else (_OPERATORS, "operator swap")
        if operator in table:
            changed = ast.Compare(node.left, [table[operator]], node.comparators)
            yield kind, f"{_symbol(node.ops[0])} to {_symbol(changed.ops[0])}", ast.unparse(changed)
    elif isinstance(node, ast.Constant) and type(node.value) is int and 0 <= node.value < 1000:
        yield "off-by-one", f"{node.value} to {node.value + 1}", str(node.value + 1)
    elif isinstance(node, ast.Call) and len(node.args) >= 2 and not any(isinstance(a, ast.Starred) for a in node.args):
        first, second, *rest = node.args
        if ast.dump(first) != ast.dump(second):
            swapped_call = ast.Call(node.func, [second, first, *rest], node.keywords)
            yield "swapped arguments", "the first two arguments swapped", ast.unparse(swapped_call)
    if isinstance(node, (ast.If, ast.While, ast.IfExp)):
        test = node.test
        negated = test.operand if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) else None
        text = ast.unparse(negated) if negated is not None else f"not ({ast.unparse(test)})"
        yield "condition negation", "a condition negated", f"\0test\0{text}"


def _symbol(operator: ast.AST) -> str:
    return {
        ast.Add: "`+`", ast.Sub: "`-`", ast.Mult: "`*`", ast.FloorDiv: "`//`", ast.Mod: "`%`",
        ast.LShift: "`<<`", ast.RShift: "`>>`", ast.BitAnd: "`&`", ast.BitOr: "`|`", ast.And: "`and`",
        ast.Or: "`or`", ast.Eq: "`==`", ast.NotEq: "`!=`", ast.In: "`in`", ast.NotIn: "`not in`",
        ast.Is: "`is`", ast.IsNot: "`is not`", ast.Lt: "`<`", ast.LtE: "`<=`", ast.Gt: "`>`", ast.GtE: "`>=`",
    }.get(type(operator), type(operator).__name__)  # fmt: skip


def _replace_segment(own: list[str], first: int, node: ast.AST, replacement: str) -> list[str] | None:
    """The function's lines with `node`'s text replaced (a node on one line only; for a
    negated condition, the node's test)."""
    if replacement.startswith("\0test\0"):
        node, replacement = node.test, replacement.removeprefix("\0test\0")  # type: ignore[attr-defined]
    lineno, end = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
    if lineno is None or lineno != end:
        return None
    index = lineno - first
    raw = own[index].encode()
    start, stop = node.col_offset, node.end_col_offset  # type: ignore[attr-defined]
    if stop is None:
        return None
    needs_parens = not isinstance(node, (ast.Constant, ast.Name, ast.Call, ast.Attribute, ast.Subscript))
    text = f"({replacement})" if needs_parens and not _wrapped(raw, start, stop) else replacement
    edited = list(own)
    edited[index] = (raw[:start] + text.encode() + raw[stop:]).decode()
    return edited


def _wrapped(raw: bytes, start: int, stop: int) -> bool:
    """Whether the segment already sits in its own parentheses (or is the whole condition)."""
    before, after = raw[:start].rstrip(), raw[stop:].lstrip()
    return (before.endswith(b"(") and after.startswith(b")")) or (
        before.endswith((b"if", b"elif", b"while", b"return", b"=")) and after.startswith((b":", b"\n", b"#"))
    )


def _dropped(node: ast.AST) -> Iterator[tuple[str, str, int, int]]:
    """Branches to remove, as (kind, detail, first line, last line) of the lines to delete."""
    if not isinstance(node, ast.If):
        return
    if node.orelse:
        body_end = node.body[-1].end_lineno or node.body[-1].lineno
        yield "dropped branch", "an else/elif branch removed", body_end + 1, node.end_lineno or body_end
    elif all(isinstance(statement, _GUARD_EXITS) for statement in node.body[-1:]):
        yield "dropped branch", "a guard clause removed", node.lineno, node.end_lineno or node.lineno
