"""Search filters: which documents a search may answer from.

    folder          a folder of the KB (relative to its docs folder): documents in it or below
    tags            every one of these tags (a tag also matches the tags nested under it)
    updated_after   saved at or after this time (ISO 8601; a date is that day's 00:00 UTC)
    updated_before  saved before this time (same forms)
    source_mode     `converted` (ingested from another format, untouched) or `edited`
    format          any of these formats: `md`, or one indexed where it lies (`pdf`, ...)

A document's time is the modification time of its file.
Times without a zone are UTC.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import PurePosixPath
from typing import Any

from cofferd.domain.errors import ValidationFailed
from cofferd.domain.formats import IN_PLACE_FORMATS, MARKDOWN, format_named
from cofferd.domain.models import utc_text
from cofferd.domain.tags import normalize_tag

SOURCE_MODES = ("converted", "edited")
MAX_FILTER_TAGS = 20
MAX_FOLDER_CHARS = 1024
MAX_FILTER_FORMATS = 20
KEYS = ("folder", "tags", "updated_after", "updated_before", "source_mode", "format")
FORMATS = (MARKDOWN, *IN_PLACE_FORMATS)


@dataclass(frozen=True)
class SearchFilters:
    folder: str | None = None  # normalised: no leading `./`, no trailing `/`
    tags: tuple[str, ...] = ()  # compared without case
    updated_after: str | None = None  # UTC, in the stored form
    updated_before: str | None = None
    source_mode: str | None = None
    format: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return any(getattr(self, key) for key in KEYS)

    def as_dict(self) -> dict[str, Any]:
        values = {k: getattr(self, k) for k in KEYS}
        values["tags"] = list(self.tags)
        values["format"] = list(self.format)
        return {k: v for k, v in values.items() if v}


def parse_filters(raw: Mapping[str, Any] | None) -> SearchFilters:
    """Filters from a request, or ValidationFailed naming the field at fault."""
    if raw is None:
        return SearchFilters()
    if not isinstance(raw, Mapping):
        raise ValidationFailed("filters must be an object", field="filters")
    unknown = sorted(set(raw) - set(KEYS))
    if unknown:
        raise ValidationFailed(
            f"unknown filter {unknown[0]!r}; filters are: {', '.join(KEYS)}",
            field=f"filters.{unknown[0]}",
        )
    after = _time(raw.get("updated_after"), "updated_after")
    before = _time(raw.get("updated_before"), "updated_before")
    if after and before and after >= before:
        raise ValidationFailed(
            "updated_after must be earlier than updated_before", field="filters.updated_after"
        )
    return SearchFilters(
        folder=_folder(raw.get("folder")),
        tags=_tags(raw.get("tags")),
        updated_after=after,
        updated_before=before,
        source_mode=_source_mode(raw.get("source_mode")),
        format=_formats(raw.get("format")),
    )


def _folder(value: Any) -> str | None:
    if value is None:
        return None
    field = "filters.folder"
    if not isinstance(value, str):
        raise ValidationFailed("folder must be a string", field=field)
    if "\0" in value or len(value) > MAX_FOLDER_CHARS:
        raise ValidationFailed("folder is not a usable path", field=field)
    path = PurePosixPath(value.replace("\\", "/"))
    if path.is_absolute():
        raise ValidationFailed(
            "folder is relative to the knowledge base's docs folder, e.g. `projects/coffer`",
            field=field,
        )
    if ".." in path.parts:
        raise ValidationFailed("folder cannot leave the knowledge base (`..`)", field=field)
    folder = path.as_posix()
    return None if folder == "." else folder


def _tags(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list) or not all(isinstance(t, str) for t in items):
        raise ValidationFailed("tags must be a list of strings", field="filters.tags")
    if len(items) > MAX_FILTER_TAGS:
        raise ValidationFailed(
            f"at most {MAX_FILTER_TAGS} tags can be required", field="filters.tags"
        )
    tags = []
    for item in items:
        tag = normalize_tag(item)
        if tag is None:
            raise ValidationFailed(f"{item!r} is not a tag", field="filters.tags")
        tags.append(tag.casefold())
    return tuple(dict.fromkeys(tags))


def _time(value: Any, name: str) -> str | None:
    if value is None:
        return None
    field = f"filters.{name}"
    if not isinstance(value, str):
        raise ValidationFailed(f"{name} must be an ISO 8601 date or time", field=field)
    try:
        if len(value) == 10:
            day = date.fromisoformat(value)
            moment = datetime(day.year, day.month, day.day, tzinfo=UTC)
        else:
            moment = datetime.fromisoformat(value)
    except ValueError:
        raise ValidationFailed(
            f"{name} must be an ISO 8601 date or time, e.g. 2026-11-30 or "
            f"2026-11-30T18:00:00+01:00; got {value[:40]!r}",
            field=field,
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    try:
        return utc_text(moment)
    except OverflowError:  # its offset carries it past year 1 or 9999 in UTC
        edge = datetime.min if moment.year == datetime.min.year else datetime.max
        return utc_text(edge.replace(tzinfo=UTC))


def _formats(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list) and len(value) <= MAX_FILTER_FORMATS:
        named = [format_named(v) if isinstance(v, str) else v for v in value]
        if all(v in FORMATS for v in named):
            return tuple(sorted(set(named)))
    raise ValidationFailed(f"format is a list of: {', '.join(FORMATS)}", field="filters.format")


def _source_mode(value: Any) -> str | None:
    if value is None:
        return None
    if value in SOURCE_MODES:
        return str(value)
    raise ValidationFailed(
        f"source_mode is one of: {', '.join(SOURCE_MODES)}", field="filters.source_mode"
    )
