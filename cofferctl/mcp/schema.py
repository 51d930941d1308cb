"""The JSON Schema the MCP tools declare, built by small helpers, and the check of a call's
arguments against it (the subset the helpers produce: type, enum, bounds, lengths,
pattern, items, properties, required, additionalProperties false)."""

from __future__ import annotations

import re
from typing import Any

JSON = dict[str, Any]
KB_NAME = "^[a-z0-9][a-z0-9_-]{0,63}$"
SHA256 = "^[0-9a-f]{64}$"


class ArgumentError(Exception):
    """The arguments of a call do not fit the tool's input schema."""


def string(
    description: str,
    *,
    min_length: int | None = None,
    max_length: int | None = None,
    pattern: str | None = None,
    enum: list[str] | None = None,
    nullable: bool = False,
) -> JSON:
    schema: JSON = {"type": ["string", "null"] if nullable else "string"}
    if enum is not None:
        schema["enum"] = [*enum, None] if nullable else enum
    for key, value in (("minLength", min_length), ("maxLength", max_length), ("pattern", pattern)):
        if value is not None:
            schema[key] = value
    schema["description"] = description
    return schema


def integer(description: str, *, minimum: int, maximum: int | None = None, default: int) -> JSON:
    schema: JSON = {"type": "integer", "minimum": minimum}
    if maximum is not None:
        schema["maximum"] = maximum
    return {**schema, "default": default, "description": description}


def boolean(description: str, *, default: bool) -> JSON:
    return {"type": "boolean", "default": default, "description": description}


def array(description: str, items: JSON, *, min_items: int = 0, max_items: int) -> JSON:
    schema: JSON = {"type": ["array", "null"], "items": items, "maxItems": max_items}
    if min_items:
        schema["minItems"] = min_items
    return {**schema, "description": description}


def kb(description: str = "the knowledge base (see list_knowledge_bases)") -> JSON:
    return string(description, pattern=KB_NAME)


def arguments(properties: dict[str, JSON], required: list[str] | None = None) -> JSON:
    """A tool's input schema: these arguments and no others."""
    return {
        "type": "object",
        "properties": properties,
        "required": required or [],
        "additionalProperties": False,
    }


def check(schema: JSON, value: Any) -> None:
    """Raise ArgumentError naming every argument that does not fit."""
    problems = _problems(schema, value, "")
    if problems:
        raise ArgumentError("; ".join(problems))


_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
    "null": (type(None),),
}


def _is(value: Any, type_name: str) -> bool:
    if isinstance(value, bool) and type_name in ("integer", "number"):
        return False
    if type_name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES[type_name])


def _problems(schema: JSON, value: Any, where: str) -> list[str]:
    name = f"`{where}`" if where else "the arguments"
    types = schema.get("type")
    if types is not None:
        allowed = [types] if isinstance(types, str) else list(types)
        if not any(_is(value, t) for t in allowed):
            return [f"{name} must be {' or '.join(allowed)}"]
    if value is None:
        return []
    if "enum" in schema and value not in schema["enum"]:
        choices = ", ".join(str(c) for c in schema["enum"] if c is not None)
        return [f"{name} must be one of: {choices}"]
    if isinstance(value, str):
        return _string_problems(schema, value, name)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _number_problems(schema, value, name)
    if isinstance(value, list):
        return _array_problems(schema, value, where, name)
    if isinstance(value, dict):
        return _object_problems(schema, value, where)
    return []


def _string_problems(schema: JSON, value: str, name: str) -> list[str]:
    if len(value) < schema.get("minLength", 0):
        return [f"{name} must not be empty" if value == "" else f"{name} is too short"]
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        return [f"{name} must be at most {schema['maxLength']} characters"]
    if "pattern" in schema and not re.search(schema["pattern"], value):
        return [f"{name} must match {schema['pattern']}"]
    return []


def _number_problems(schema: JSON, value: float, name: str) -> list[str]:
    if "minimum" in schema and value < schema["minimum"]:
        return [f"{name} must be at least {schema['minimum']}"]
    if "maximum" in schema and value > schema["maximum"]:
        return [f"{name} must be at most {schema['maximum']}"]
    return []


def _array_problems(schema: JSON, value: list[Any], where: str, name: str) -> list[str]:
    if len(value) < schema.get("minItems", 0):
        return [f"{name} needs at least {schema['minItems']} item(s)"]
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        return [f"{name} takes at most {schema['maxItems']} items"]
    items = schema.get("items", {})
    return [p for i, v in enumerate(value) for p in _problems(items, v, f"{where}[{i}]")]


def _object_problems(schema: JSON, value: dict[str, Any], where: str) -> list[str]:
    properties: dict[str, JSON] = schema.get("properties", {})
    prefix = f"{where}." if where else ""
    problems = []
    if schema.get("additionalProperties") is False:
        unknown = [k for k in value if k not in properties]
        if unknown:
            known = ", ".join(properties) or "none"
            names = ", ".join(f"`{prefix}{k}`" for k in unknown)
            problems.append(f"unknown argument {names} (the arguments are: {known})")
    missing = [k for k in schema.get("required", []) if k not in value]
    problems += [f"`{prefix}{k}` is required" for k in missing]
    for key, item in value.items():
        if key in properties:
            problems += _problems(properties[key], item, f"{prefix}{key}")
    return problems
