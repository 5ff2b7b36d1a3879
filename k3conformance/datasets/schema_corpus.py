"""A generated corpus of tool-parameter JSON schemas, for tool calls checked at scale.

Authored for k3conformance (Apache-2.0): each schema is composed, from a fixed seed, out
of the keyword families that Moonshot's Kimi-Vendor-Verifier samples with its 212
walle-valid schemas (range constraints, number formats, `$id`, nested `$defs` and
`$ref`, keyword combinations, strings with formats and patterns, arrays, nested objects
with `additionalProperties: false`). KVV's schemas are not copied. Every schema is a
valid Draft 2020-12 object schema; the suite sends it as a tool's parameters with
`tool_choice: "required"` and validates the arguments against it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

Schema = dict[str, Any]
SEED = 20261130
PER_FAMILY = 30

# (pattern, a string it matches): a pattern comes with an example, as an API user writes one.
_PATTERNS = (
    (r"^[A-Z]{3}-\d{4}$", "ABC-1234"),
    (r"^\+?[0-9 ]{7,15}$", "+49 30 1234567"),
    (r"^[a-z0-9_]{3,16}$", "user_42"),
    (r"^#[0-9a-fA-F]{6}$", "#1a2B3c"),
    (r"^v\d+\.\d+\.\d+$", "v1.12.0"),
)
_FORMATS = ("date", "date-time", "time", "email", "uri", "uuid")
_WORDS = ("city", "amount", "count", "label", "owner", "region", "score", "limit", "code", "ratio", "note", "level")


@dataclass(frozen=True)
class ToolSchemaCase:
    id: str
    family: str
    schema: Schema


def _name(rng: random.Random, used: set[str]) -> str:
    while True:
        name = f"{rng.choice(_WORDS)}_{rng.randrange(100)}"
        if name not in used:
            used.add(name)
            return name


def _number(rng: random.Random) -> Schema:
    kind = rng.choice(("integer", "number"))
    low = rng.randrange(-50, 50)
    schema: Schema = {"type": kind}
    bound = rng.choice(("inclusive", "exclusive", "both", "multiple"))
    if bound in ("inclusive", "both"):
        schema["minimum"] = low
        schema["maximum"] = low + rng.randrange(1, 500)
    if bound in ("exclusive", "both"):
        schema["exclusiveMinimum"] = low - 1
        schema["exclusiveMaximum"] = low + rng.randrange(2, 500)
    if bound == "multiple":
        schema["multipleOf"] = rng.choice((2, 5, 10)) if kind == "integer" else rng.choice((0.5, 0.25))
        schema["minimum"] = abs(low) + 1
    return schema


def _number_format(rng: random.Random) -> Schema:
    if rng.random() < 0.5:
        values = sorted({round(rng.uniform(-100, 100), rng.choice((0, 2))) for _ in range(rng.randrange(2, 5))})
        return {"type": "number", "enum": values}
    return {"type": rng.choice(("number", "integer")), "format": rng.choice(("int32", "int64", "float", "double"))}


def _string(rng: random.Random) -> Schema:
    choice = rng.choice(("length", "format", "pattern", "enum", "const"))
    if choice == "length":
        low = rng.randrange(1, 12)
        return {"type": "string", "minLength": low, "maxLength": low + rng.randrange(0, 40)}
    if choice == "format":
        return {"type": "string", "format": rng.choice(_FORMATS)}
    if choice == "pattern":
        pattern, example = rng.choice(_PATTERNS)
        return {"type": "string", "pattern": pattern, "examples": [example]}
    if choice == "enum":
        return {"type": "string", "enum": rng.sample(("red", "green", "blue", "amber", "violet", "teal"), 3)}
    return {"const": rng.choice(("v1", "fixed", "on"))}


def _array(rng: random.Random) -> Schema:
    low = rng.randrange(1, 4)
    return {
        "type": "array",
        "items": rng.choice((_number, _string, _number_format))(rng),
        "minItems": low,
        "maxItems": low + rng.randrange(0, 5),
    }


def _leaf(rng: random.Random) -> Schema:
    return rng.choice((_number, _number_format, _string, _array))(rng)


def _object(rng: random.Random, depth: int, *, closed: bool) -> Schema:
    used: set[str] = set()
    properties = {
        _name(rng, used): (_object(rng, depth - 1, closed=closed) if depth > 0 and rng.random() < 0.4 else _leaf(rng))
        for _ in range(rng.randrange(1, 4))
    }
    schema: Schema = {
        "type": "object",
        "properties": properties,
        "required": sorted(rng.sample(sorted(properties), rng.randrange(1, len(properties) + 1))),
    }
    if closed:
        schema["additionalProperties"] = False
    return schema


def _with_description(rng: random.Random, schema: Schema) -> Schema:
    return {"description": f"A {rng.choice(_WORDS)} value, as the user gave it.", **schema}


def _flat_object(rng: random.Random, property_schema: Callable[[random.Random], Schema], most: int) -> Schema:
    """An object of 1 to `most` required properties, each built by `property_schema`."""
    used: set[str] = set()
    properties = {_name(rng, used): property_schema(rng) for _ in range(rng.randrange(1, most + 1))}
    return {"type": "object", "properties": properties, "required": sorted(properties)}


def _family_range(rng: random.Random) -> Schema:
    return _flat_object(rng, _number, 3)


def _family_number_format(rng: random.Random) -> Schema:
    return _flat_object(rng, _number_format, 3)


def _family_string(rng: random.Random) -> Schema:
    return _flat_object(rng, lambda inner: _with_description(inner, _string(inner)), 3)


def _family_array(rng: random.Random) -> Schema:
    return _flat_object(rng, _array, 2)


def _family_nested(rng: random.Random) -> Schema:
    return _object(rng, rng.randrange(1, 4), closed=True)


def _family_defs(rng: random.Random) -> Schema:
    # Definitions that refer to one another, up to three levels deep.
    depth = rng.randrange(1, 4)
    defs: Schema = {"level0": _object(rng, 0, closed=rng.random() < 0.5)}
    for level in range(1, depth + 1):
        defs[f"level{level}"] = {
            "type": "object",
            "properties": {"inner": {"$ref": f"#/$defs/level{level - 1}"}, "tag": _string(rng)},
            "required": ["inner"],
        }
    return {
        "type": "object",
        "$defs": defs,
        "properties": {"root": {"$ref": f"#/$defs/level{depth}"}},
        "required": ["root"],
    }


def _family_id(rng: random.Random) -> Schema:
    schema = _family_defs(rng) if rng.random() < 0.5 else _object(rng, 1, closed=False)
    return {"$id": f"https://schemas.example.com/tools/{rng.randrange(10_000)}.json", **schema}


def _family_combination(rng: random.Random) -> Schema:
    used: set[str] = set()
    choice = rng.choice(("anyOf", "oneOf", "allOf", "nullable"))
    if choice == "anyOf":
        combined: Schema = {"anyOf": [_leaf(rng), _leaf(rng)]}
    elif choice == "oneOf":
        # Branches of different types, so that a value matches exactly one.
        combined = {"oneOf": [{"type": "string", "minLength": 1}, {"type": "integer", "minimum": 0}]}
        rng.shuffle(combined["oneOf"])
    elif choice == "allOf":
        combined = {"allOf": [_object(rng, 0, closed=False), _object(rng, 0, closed=False)]}
    else:
        combined = {"type": [rng.choice(("string", "integer", "number")), "null"]}
    properties = {_name(rng, used): combined, _name(rng, used): _leaf(rng)}
    return {"type": "object", "properties": properties, "required": sorted(properties)}


FAMILIES: dict[str, Callable[[random.Random], Schema]] = {
    "range": _family_range,
    "number-format": _family_number_format,
    "string": _family_string,
    "array": _family_array,
    "nested": _family_nested,
    "defs": _family_defs,
    "id": _family_id,
    "combination": _family_combination,
}


@cache
def tool_schema_corpus(per_family: int = PER_FAMILY, seed: int = SEED) -> tuple[ToolSchemaCase, ...]:
    cases = []
    for family, build in FAMILIES.items():
        rng = random.Random(f"{seed}:{family}")
        cases += [ToolSchemaCase(f"{family}-{index:03d}", family, build(rng)) for index in range(per_family)]
    return tuple(cases)


# The one tool a case is sent as, and what the user asks of it.
TOOL = "record_values"
_TOOL_DESCRIPTION = "Record a set of values. Every argument must satisfy the parameter schema."
_PROMPT = f"Call {TOOL} once with example values that satisfy its parameter schema exactly."


def tool_request(case: ToolSchemaCase, *, stream: bool, strict: bool = False) -> dict[str, Any]:
    """A case as a partial chat request: its schema as the parameters of the one tool, which
    `tool_choice: "required"` forces a call to; `strict` declares the tool `strict: true` (guided
    decoding by the schema), which only the load lane's strict phase asks for."""
    function: dict[str, Any] = {"name": TOOL, "description": _TOOL_DESCRIPTION}
    if strict:
        function["strict"] = True
    function["parameters"] = case.schema
    return {
        "messages": [{"role": "user", "content": _PROMPT}],
        "tools": [{"type": "function", "function": function}],
        "tool_choice": "required",
        "stream": stream,
    }
