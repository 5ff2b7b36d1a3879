"""Scoring of tool calls: argument parsing, schema validity, answer matching and trigger metrics.

Two references shape the rules. BFCL's AST checker (bfcl_eval/eval_checker/ast_eval/
ast_checker.py) decides whether calls match its possible answers; Moonshot's
K2-Vendor-Verifier measures whether a deployment calls a tool when it should (trigger
precision/recall/F1) and whether the arguments it sends fit the tool's schema.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from jsonschema import Draft202012Validator

Call = tuple[str, Mapping[str, Any]]
# BFCL's possible answers: {function name: {parameter: [allowed values]}}.
GroundTruthCall = Mapping[str, Mapping[str, Sequence[Any]]]

Expected = TypeVar("Expected")

# BFCL lists "" among a parameter's allowed values to say the parameter may be omitted.
OMITTABLE = ""
# The characters BFCL's standardize_string drops, so "April 1, 2024" equals "April 1 2024".
_IGNORED_STRING_CHARS = re.compile(r"[ \,\.\/\-\_\*\^]")
_WRONG_NAME = "wrong function name"


@dataclass(frozen=True)
class MatchResult:
    ok: bool
    reason: str | None = None

    @classmethod
    def success(cls) -> MatchResult:
        return cls(True)

    @classmethod
    def failure(cls, reason: str) -> MatchResult:
        return cls(False, reason)

    def __bool__(self) -> bool:
        return self.ok


# ---------------------------------------------------------------- arguments and schemas


def _reject_non_json_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_arguments(raw: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """The arguments object of a tool call, or why `raw` is not one."""
    if raw is None:
        return None, "arguments are missing"
    try:
        # Python's json accepts NaN and Infinity; a strict JSON client would not.
        value = json.loads(raw, parse_constant=_reject_non_json_constant)
    except ValueError as error:
        return None, f"arguments are not valid JSON: {error}"
    if not isinstance(value, dict):
        return None, f"arguments must be a JSON object, got {_json_type_name(value)}"
    return value, None


def _json_type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else type(value).__name__


def schema_errors(tool_parameters: Mapping[str, Any], arguments: Mapping[str, Any]) -> list[str]:
    """Readable reasons why `arguments` do not fit the tool's parameters schema; [] when they do.

    An invalid schema raises jsonschema.SchemaError: that is a bug in the tool, not in the call.
    """
    validator = _validator(json.dumps(tool_parameters, sort_keys=True))
    errors = sorted(validator.iter_errors(arguments), key=lambda error: (list(map(str, error.path)), error.message))
    return [f"{error.json_path}: {error.message}" for error in errors]


# Checking a schema against the metaschema cost more than the call it validates (an agent task
# checks the same few tool schemas on every call of every turn), so a schema is checked and
# compiled once, keyed by its canonical JSON. A bad schema raises again each time: errors are
# not cached.
@functools.lru_cache(maxsize=256)
def _validator(canonical_schema: str) -> Draft202012Validator:
    schema = json.loads(canonical_schema)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


# ---------------------------------------------------------------- matching calls, order-free


def _plural_calls(count: int) -> str:
    return f"{count} call" if count == 1 else f"{count} calls"


def _maximum_matching(compatible: Sequence[Sequence[bool]], width: int) -> list[int | None]:
    """For each row, the column it is matched to (Kuhn's augmenting paths); None if unmatched."""
    column_owner: list[int | None] = [None] * width

    def assign(row: int, visited: set[int]) -> bool:
        for column in range(width):
            if compatible[row][column] and column not in visited:
                visited.add(column)
                owner = column_owner[column]
                if owner is None or assign(owner, visited):
                    column_owner[column] = row
                    return True
        return False

    for row in range(len(compatible)):
        assign(row, set())
    row_match: list[int | None] = [None] * len(compatible)
    for column, owner in enumerate(column_owner):
        if owner is not None:
            row_match[owner] = column
    return row_match


def _match_order_free(
    expected: Sequence[Expected], calls: Sequence[Call], mismatch: Callable[[Expected, Call], str | None]
) -> MatchResult:
    if len(expected) != len(calls):
        return MatchResult.failure(f"expected {_plural_calls(len(expected))}, got {len(calls)}")
    reasons = [[mismatch(want, call) for call in calls] for want in expected]
    matching = _maximum_matching([[reason is None for reason in row] for row in reasons], len(calls))
    unmatched_rows = [row for row, column in enumerate(matching) if column is None]
    if not unmatched_rows:
        return MatchResult.success()
    return MatchResult.failure(_first_failure(expected, calls, reasons, matching, unmatched_rows[0]))


def _first_failure(
    expected: Sequence[Expected],
    calls: Sequence[Call],
    reasons: Sequence[Sequence[str | None]],
    matching: Sequence[int | None],
    row: int,
) -> str:
    # Explain the failure against a call nobody else claimed, preferring one with the
    # expected name: "wrong value" tells more than "wrong function name".
    free = [column for column in range(len(calls)) if column not in matching]
    same_name = [column for column in free if not str(reasons[row][column]).startswith(_WRONG_NAME)]
    column = (same_name or free)[0]
    reason = reasons[row][column] or "no consistent assignment of calls"
    return reason if len(expected) == 1 else f"expected call {row + 1} of {len(expected)}: {reason}"


def _wrong_name(expected: str, got: str) -> str:
    return f"{_WRONG_NAME}: expected {expected}, got {got}"


# ---------------------------------------------------------------- BFCL ground truth


def match_ground_truth(ground_truth: Sequence[GroundTruthCall], calls: Sequence[Call]) -> MatchResult:
    """BFCL AST semantics: as many calls as answers, matched in any order, each value allowed.

    Unlike BFCL, required parameters come from the answers (those without "" among their
    allowed values), not from the function's schema; check the schema with schema_errors.
    """
    return _match_order_free(ground_truth, calls, _ground_truth_mismatch)


def _ground_truth_mismatch(answer: GroundTruthCall, call: Call) -> str | None:
    ((expected_name, allowed_by_parameter),) = answer.items()
    name, arguments = call
    if name != expected_name:
        return _wrong_name(expected_name, name)
    for parameter, allowed in allowed_by_parameter.items():
        if parameter not in arguments and OMITTABLE not in allowed:
            return f"missing required parameter {parameter!r}"
    for parameter in arguments:
        if parameter not in allowed_by_parameter:
            return f"unexpected parameter {parameter!r}"
    for parameter, value in arguments.items():
        allowed = allowed_by_parameter[parameter]
        if not any(value_allowed(value, candidate) for candidate in allowed):
            return f"parameter {parameter!r}: got {value!r}, allowed {list(allowed)!r}"
    return None


def standardize_string(text: str) -> str:
    """BFCL's normalisation: no spaces or ,./-_*^ punctuation, lower case, ' read as "."""
    return _IGNORED_STRING_CHARS.sub("", text).lower().replace("'", '"')


def value_allowed(value: Any, candidate: Any) -> bool:
    """Whether a model's value equals one BFCL allowed value, with BFCL's leniencies."""
    if isinstance(value, bool) or isinstance(candidate, bool):
        # bool is an int in Python, but True is no answer for 1.
        return isinstance(value, bool) and isinstance(candidate, bool) and value == candidate
    if isinstance(value, str) and isinstance(candidate, str):
        return standardize_string(value) == standardize_string(candidate)
    if isinstance(value, (int, float)) and isinstance(candidate, (int, float)):
        # BFCL accepts an int where a float is expected: 5 for 5.0.
        return value == candidate
    if isinstance(value, list) and isinstance(candidate, list):
        return len(value) == len(candidate) and all(map(value_allowed, value, candidate))
    if isinstance(value, dict) and isinstance(candidate, dict):
        return _dict_allowed(value, candidate)
    return value is None and candidate is None


def _dict_allowed(value: Mapping[str, Any], candidate: Mapping[str, Any]) -> bool:
    # An allowed dict is itself {key: [allowed values]}, with "" marking an omittable key.
    allowed_by_key = {key: allowed if isinstance(allowed, list) else [allowed] for key, allowed in candidate.items()}
    if any(key not in allowed_by_key for key in value):
        return False
    if any(key not in value and OMITTABLE not in allowed for key, allowed in allowed_by_key.items()):
        return False
    return all(any(value_allowed(item, option) for option in allowed_by_key[key]) for key, item in value.items())


# ---------------------------------------------------------------- authored expected calls


def expected_calls_match(expected: Sequence[Mapping[str, Any]], calls: Sequence[Call]) -> MatchResult:
    """Exact arguments (after a JSON round trip), calls in any order.

    `expected` holds {"name": ..., "arguments": {...}}, as in fixtures/tool_calls.json.
    """
    return _match_order_free(expected, calls, _expected_call_mismatch)


def _json_round_trip(value: Any) -> Any:
    return json.loads(json.dumps(value, ensure_ascii=False))


def _expected_call_mismatch(want: Mapping[str, Any], call: Call) -> str | None:
    name, arguments = call
    if name != want["name"]:
        return _wrong_name(str(want["name"]), name)
    expected_arguments: dict[str, Any] = _json_round_trip(dict(want.get("arguments", {})))
    actual_arguments: dict[str, Any] = _json_round_trip(dict(arguments))
    for parameter in expected_arguments:
        if parameter not in actual_arguments:
            return f"missing required parameter {parameter!r}"
    for parameter in actual_arguments:
        if parameter not in expected_arguments:
            return f"unexpected parameter {parameter!r}"
    for parameter, value in actual_arguments.items():
        if not json_equal(value, expected_arguments[parameter]):
            return f"parameter {parameter!r}: got {value!r}, expected {expected_arguments[parameter]!r}"
    return None


def json_equal(left: Any, right: Any) -> bool:
    """Equality of JSON values: 3 equals 3.0 (one JSON number), but true never equals 1."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, (int, float)) and isinstance(right, (int, float)):
        return left == right
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(json_equal, left, right))
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(json_equal(left[key], right[key]) for key in left)
    return type(left) is type(right) and bool(left == right)


# ---------------------------------------------------------------- K2-Vendor-Verifier metrics


def _ratio(numerator: int, denominator: int) -> float | None:
    return numerator / denominator if denominator else None


@dataclass
class TriggerCounts:
    """Whether the model called a tool when one was expected: a positive is "made a call"."""

    true_positive: int = 0
    false_positive: int = 0
    false_negative: int = 0
    true_negative: int = 0

    def add(self, expected_call: bool, made_call: bool) -> None:
        if expected_call and made_call:
            self.true_positive += 1
        elif made_call:
            self.false_positive += 1
        elif expected_call:
            self.false_negative += 1
        else:
            self.true_negative += 1

    @property
    def precision(self) -> float | None:
        return _ratio(self.true_positive, self.true_positive + self.false_positive)

    @property
    def recall(self) -> float | None:
        return _ratio(self.true_positive, self.true_positive + self.false_negative)

    @property
    def f1(self) -> float | None:
        # 2TP / (2TP + FP + FN) equals the harmonic mean of precision and recall where both
        # exist, and stays defined (0.0) when the model never calls or is never right.
        return _ratio(2 * self.true_positive, 2 * self.true_positive + self.false_positive + self.false_negative)


@dataclass
class SchemaAccuracy:
    """The share of tool calls whose arguments parse and fit the tool's schema."""

    valid_calls: int = 0
    calls: int = 0

    def add(self, valid: bool) -> None:
        self.calls += 1
        self.valid_calls += int(valid)

    @property
    def accuracy(self) -> float | None:
        return _ratio(self.valid_calls, self.calls)
