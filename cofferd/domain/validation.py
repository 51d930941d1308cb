"""The one place that turns pydantic's errors into VALIDATION_ERROR messages a person reads:
which field, the value given (shortened), and what is allowed, without pydantic's wording."""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from cofferd.domain.errors import ValidationFailed

SHOWN_CHARS = 40  # a wrong value is shown up to this length
FIELD_CHARS = 200  # a field's name (a path of keys and indexes) up to this length
ERRORS_SHOWN = 20  # the errors of one input listed; the rest are counted
# What a field with a pattern must look like, in words.
PATTERNS = {
    "credential_ref": "env:NAME or file:/absolute/path",
    "expected_sha256": "64 lowercase hexadecimal digits",
}
KINDS = {
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "int_from_float": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "text",
    "list_type": "a list",
    "dict_type": "an object ({key: value, ...})",
    "model_type": "an object ({key: value, ...})",
    "model_attributes_type": "an object ({key: value, ...})",
    "none_required": "null",
}
_PYDANTIC_WORDS = (("Value error, ", ""), ("Input should be", "must be"), ("String should", "must"))


def validation_failed(
    prefix: str, exc: ValidationError, model: type[BaseModel] | None = None
) -> ValidationFailed:
    """At most ERRORS_SHOWN of the errors, each bounded (a value is shown up to SHOWN_CHARS
    characters, a field name up to FIELD_CHARS): an input of any size gives a short answer."""
    found = exc.errors(include_url=False, include_input=True)
    errors = [
        {"field": field_name(err["loc"]), "message": _sentence(err, _message(err, model))}
        for err in found[:ERRORS_SHOWN]
    ]
    summary = "; ".join(e["message"] for e in errors)
    if len(found) > ERRORS_SHOWN:
        summary += f"; and {len(found) - ERRORS_SHOWN:,} more"
    first = errors[0]["field"] if errors else ""
    return ValidationFailed(f"{prefix}: {summary}", field=first, errors=errors)


def field_name(loc: Sequence[int | str]) -> str:
    """`embedding.credential_ref`, `enabled_modes[0]`; empty for the whole object; cut
    with an ellipsis past FIELD_CHARS."""
    name = ""
    for part in loc:
        text = part if isinstance(part, int) else str(part)[:FIELD_CHARS]
        name += f"[{text}]" if isinstance(part, int) else (f".{text}" if name else str(text))
        if len(name) > FIELD_CHARS:
            return name[: FIELD_CHARS - 1] + "…"
    return name


def _sentence(err: ErrorDetails, message: str) -> str:
    """The message with the field it is about (an unknown key names itself)."""
    loc = err["loc"]
    field = field_name(loc[:-1] if err["type"] == "extra_forbidden" else loc)
    if not field:
        return message
    return f"{field} {message}" if message.startswith(("is ", "must ")) else f"{field}: {message}"


def shown(value: Any) -> str:
    """The value as JSON, cut with an ellipsis past SHOWN_CHARS characters; only as much of
    it is rendered as is shown, whatever its size (a string of megabytes, a list of
    millions, a structure an expanded YAML alias shares a billion times)."""
    parts: list[str] = []
    _render(value, parts, SHOWN_CHARS + 1)
    text = "".join(parts)
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def _render(value: Any, parts: list[str], room: int) -> int:
    """Appends up to about `room` characters of the value's JSON; returns the room left."""
    if room <= 0:
        return room
    if isinstance(value, str):
        text = json.dumps(value[:room], ensure_ascii=False)
    elif isinstance(value, dict):
        parts.append("{")
        room -= 1
        for i, (key, item) in enumerate(value.items()):
            if room <= 0:
                return room
            if i:
                parts.append(", ")
                room -= 2
            room = _render(str(key), parts, room)
            parts.append(": ")
            room = _render(item, parts, room - 2)
        parts.append("}")
        return room - 1
    elif isinstance(value, list | tuple):
        parts.append("[")
        room -= 1
        for i, item in enumerate(value):
            if room <= 0:
                return room
            if i:
                parts.append(", ")
                room -= 2
            room = _render(item, parts, room)
        parts.append("]")
        return room - 1
    else:
        try:
            text = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError):
            text = repr(value)[:room]
    parts.append(text[:room])
    return room - len(text)


def _message(err: ErrorDetails, model: type[BaseModel] | None) -> str:
    kind, loc, ctx = err["type"], err["loc"], err.get("ctx") or {}
    value = shown(err.get("input"))
    if kind == "missing":
        return "is required"
    if kind == "extra_forbidden":
        owner = _model_at(model, loc[:-1])
        keys = f"; valid keys: {', '.join(owner.model_fields)}" if owner else ""
        return f"unknown key {shown(loc[-1])}{keys}"
    if kind == "literal_error":
        return f"{value} is not allowed; choose {ctx.get('expected', 'another value')}"
    if kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
        return f"{value} is out of range; allowed: {_bounds(_field_at(model, loc), ctx)}"
    if kind in ("finite_number",):
        return f"{value} is not allowed; give a finite number"
    if kind in KINDS:
        if not loc:
            return f"the body must be {KINDS[kind]}, not {value}"
        return f"{value} is not {KINDS[kind]}"
    if kind == "string_too_short":
        if ctx.get("min_length") == 1:
            return "must not be empty"
        return f"{value} is too short; give at least {ctx.get('min_length')} characters"
    if kind == "string_too_long":
        return f"{value} is too long; give at most {ctx.get('max_length')} characters"
    if kind == "too_short" and ctx.get("min_length") == 1:
        return "must not be empty"
    if kind in ("too_short", "too_long"):
        low, high = ctx.get("min_length"), ctx.get("max_length")
        return f"has {ctx.get('actual_length')} items; allowed: {_range(low, high, 'items')}"
    if kind == "string_pattern_mismatch":
        form = PATTERNS.get(str(loc[-1]) if loc else "", "the documented form")
        return f"{value} is not in the form {form}"
    message = err["msg"]
    for words, plain in _PYDANTIC_WORDS:
        message = message.replace(words, plain)
    return message


def _range(low: Any, high: Any, unit: str = "") -> str:
    unit = f" {unit}" if unit else ""
    if low is not None and high is not None:
        return f"{low} to {high}{unit}"
    return f"at least {low}{unit}" if low is not None else f"at most {high}{unit}"


def _bounds(field: FieldInfo | None, ctx: dict[str, Any]) -> str:
    limits = dict(ctx)
    for item in field.metadata if field else ():
        for name in ("ge", "gt", "le", "lt"):
            if getattr(item, name, None) is not None:
                limits[name] = getattr(item, name)
    low = f"at least {limits['ge']}" if "ge" in limits else None
    low = f"more than {limits['gt']}" if "gt" in limits else low
    high = f"at most {limits['le']}" if "le" in limits else None
    high = f"less than {limits['lt']}" if "lt" in limits else high
    if "ge" in limits and "le" in limits:
        return f"{limits['ge']} to {limits['le']}"
    return " and ".join(part for part in (low, high) if part)


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models a field's type holds (`EmbeddingConfig | None`, `list[Filters]`)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType, list):
        return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]
    return []


def _model_at(model: type[BaseModel] | None, loc: Sequence[int | str]) -> type[BaseModel] | None:
    for part in loc:
        if model is None:
            return None
        if isinstance(part, int):
            continue  # an item of a list: its model is the list's
        field = model.model_fields.get(part)
        found = _models_in(field.annotation) if field else []
        model = found[0] if found else None
    return model


def _field_at(model: type[BaseModel] | None, loc: Sequence[int | str]) -> FieldInfo | None:
    names = [p for p in loc if isinstance(p, str)]
    if not names:
        return None
    owner = _model_at(model, loc[: max(i for i, p in enumerate(loc) if isinstance(p, str))])
    return owner.model_fields.get(names[-1]) if owner else None
