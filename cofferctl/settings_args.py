"""`KEY=VALUE` settings from the command line into the JSON the daemon takes.

A value is JSON when it parses as JSON, else text. Where the knowledge base already has a
setting, its current value tells the shape: a list setting takes `a,b` (one item too), a
byte count takes `10MiB` or `25 MB`, a text setting any text. Without a current value (a
new knowledge base), text with a comma is a list and a number with a unit a byte count.
The daemon validates the result and names what is wrong. `null` removes a setting (its
default applies again): the daemon merges what is sent into what is set (a JSON merge
patch), so `embedding.model=x` or `embedding={"model": "x"}` changes only the model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from cofferctl.command import UsageError

_UNITS = {
    "": 1, "b": 1,
    "kb": 1000, "mb": 1000**2, "gb": 1000**3,
    "k": 1024, "kib": 1024, "m": 1024**2, "mib": 1024**2, "g": 1024**3, "gib": 1024**3,
}  # fmt: skip
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$", re.IGNORECASE)


def parse_size(text: str) -> int | None:
    """`10MiB` -> 10485760, `25 MB` -> 25000000, `4096` -> 4096; None when not a size."""
    match = _SIZE.match(text)
    if not match or match[2].lower() not in _UNITS:
        return None
    return int(float(match[1]) * _UNITS[match[2].lower()])


def parse_settings(
    pairs: Sequence[str], current: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """`chunk_size=256 embedding.model=x` -> {"chunk_size": 256, "embedding": {"model": "x"}}.
    Every pair applies; a key given twice, or with a part of it (`embedding=...` and
    `embedding.model=...`), is refused, naming it: which one was meant cannot be told."""
    config: dict[str, Any] = {}
    given: list[str] = []
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"expected KEY=VALUE, got {pair!r}")
        for earlier in given:
            if _overlap(earlier, key):
                same = "twice" if earlier == key else f"with {earlier}"
                raise UsageError(f"{key} is set {same}: give each setting once")
        given.append(key)
        *parents, leaf = key.split(".")
        target, now = config, current
        for part in parents:
            target = target.setdefault(part, {})
            now = now.get(part) if isinstance(now, Mapping) else None
        existing = now.get(leaf) if isinstance(now, Mapping) else None
        target[leaf] = _value(raw, existing)
    return config


def _overlap(one: str, other: str) -> bool:
    """Whether two keys name the same setting, or one a part of the other."""
    return one == other or other.startswith(one + ".") or one.startswith(other + ".")


def _value(raw: str, existing: Any) -> Any:
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    if isinstance(existing, str) and value is not None and not isinstance(value, str):
        return raw  # a text setting takes any text: a folder named 2024
    if isinstance(existing, list) and not isinstance(value, list):
        return [part.strip() for part in raw.split(",") if part.strip()]
    if isinstance(existing, int) and not isinstance(existing, bool) and isinstance(value, str):
        size = parse_size(value)
        return value if size is None else size
    if existing is None and isinstance(value, str):
        if "," in raw:
            return [part.strip() for part in raw.split(",") if part.strip()]
        size = parse_size(value)
        return value if size is None or value.strip().isdigit() else size
    return value
