"""Synthesis of a small value that validates against a JSON schema (tool arguments, structured output)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

# Recursive schemas (a tree node holding child nodes) stop growing at this depth.
_MAX_DEPTH = 8
# Past this, only a schema that can never be satisfied (a required self-reference) is still recursing.
_GIVE_UP_DEPTH = 64
# More characters than a tool call can carry within K3's output budget.
_LONGEST_STRING = 1_000_000
_STRING_FORMATS = {
    "date": "2025-01-01",
    "date-time": "2025-01-01T00:00:00Z",
    "time": "00:00:00Z",
    "email": "user@example.com",
    "uri": "https://example.com",
    "uuid": "00000000-0000-4000-8000-000000000000",
}


class UnsupportedSchema(ValueError):
    pass


class EndlessSchema(UnsupportedSchema):
    """Only values nested without end satisfy it (a node that must hold a next node)."""


def example_value(schema: Mapping[str, Any]) -> Any:
    return _value(schema, schema, 0)


def _resolve(ref: str, root: Mapping[str, Any]) -> Mapping[str, Any]:
    if not ref.startswith("#"):
        raise UnsupportedSchema(f"only local $ref is supported, got {ref!r}")
    node: Any = root
    try:
        for part in filter(None, ref[1:].split("/")):
            node = node[part.replace("~1", "/").replace("~0", "~")]
    except (KeyError, TypeError):
        raise UnsupportedSchema(f"$ref {ref!r} points nowhere") from None
    if not isinstance(node, dict):
        raise UnsupportedSchema(f"$ref {ref!r} is not a schema")
    return node


def _value(schema: Mapping[str, Any], root: Mapping[str, Any], depth: int) -> Any:
    if depth > _GIVE_UP_DEPTH:
        raise EndlessSchema("the schema requires infinitely nested values")
    if "$ref" in schema:
        return _value(_resolve(schema["$ref"], root), root, depth + 1)
    if "const" in schema:
        return schema["const"]
    if schema.get("examples"):
        return schema["examples"][0]  # the user's own example fits its pattern
    if schema.get("enum"):
        return schema["enum"][0]
    for combinator in ("anyOf", "oneOf"):
        if schema.get(combinator):
            branches = list(schema[combinator])
            if depth >= _MAX_DEPTH:
                # A recursive type ends in its branch without a reference (a linked list's null).
                branches.sort(key=lambda branch: isinstance(branch, dict) and "$ref" in branch)
            return _value(branches[0], root, depth)
    if schema.get("allOf"):
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            value = _value(part, root, depth)
            if not isinstance(value, dict):
                return value
            merged.update(value)
        return merged
    kind = _kind(schema)
    if kind == "object":
        return _object(schema, root, depth)
    if kind == "array":
        items = schema.get("items")
        item_schema: Mapping[str, Any] = items if isinstance(items, dict) else {}
        count = max(1, int(schema.get("minItems", 1)))
        if depth >= _MAX_DEPTH:
            count = int(schema.get("minItems", 0))
        return [_value(item_schema, root, depth + 1) for _ in range(count)]
    if kind in ("integer", "number"):
        return _number(schema, kind)
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return _string(schema)


def _kind(schema: Mapping[str, Any]) -> str:
    declared = schema.get("type")
    if isinstance(declared, list):
        declared = next((kind for kind in declared if kind != "null"), "null")
    if isinstance(declared, str):
        return declared
    if "properties" in schema:
        return "object"
    return "array" if "items" in schema else "string"


def _object(schema: Mapping[str, Any], root: Mapping[str, Any], depth: int) -> dict[str, Any]:
    properties: Mapping[str, Any] = schema.get("properties", {})
    declared = schema.get("required", ())
    required = schema.get("required", list(properties))
    if depth >= _MAX_DEPTH:
        required = [name for name in required if name in declared]
    value = {}
    for name in required:
        try:
            value[name] = _value(properties.get(name, {}), root, depth + 1)
        except EndlessSchema:
            if name in declared:
                raise
            # An optional property whose type cannot end (a node that must have a next node) is left out.
    return value


def _number(schema: Mapping[str, Any], kind: str) -> int | float:
    value = 1.0
    if "minimum" in schema:
        value = max(value, float(schema["minimum"]))
    if "exclusiveMinimum" in schema:
        value = max(value, float(schema["exclusiveMinimum"]) + 1)
    if "maximum" in schema:
        value = min(value, float(schema["maximum"]))
    if "exclusiveMaximum" in schema:
        value = min(value, float(schema["exclusiveMaximum"]) - (1 if kind == "integer" else 0.5))
    step = schema.get("multipleOf")
    if isinstance(step, (int, float)) and step > 0:
        value = math.ceil(value / step) * step  # the smallest multiple at or above the lower bound
    return int(value) if kind == "integer" else value


def _string(schema: Mapping[str, Any]) -> str:
    text = _STRING_FORMATS.get(str(schema.get("format")), "example")
    min_length = int(schema.get("minLength", 0))
    if min_length > _LONGEST_STRING:
        raise UnsupportedSchema(f"minLength {min_length} is beyond what one response can hold")
    if len(text) < min_length:
        text = text + "x" * (min_length - len(text))
    return text[: int(schema.get("maxLength", len(text)))]
