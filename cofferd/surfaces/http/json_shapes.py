"""The API's JSON: request bodies (strict pydantic models) and response shapes."""

from __future__ import annotations

import json
from functools import partial
from typing import Annotated, Any, Literal, TypeVar

from aiohttp import web
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from cofferd.application.documents.documents import DocumentView
from cofferd.application.documents.ingest import IngestResult
from cofferd.application.documents.trash import Trashed
from cofferd.application.search.retrieval import MAX_MATCHES_DEFAULT, TOP_K_DEFAULT
from cofferd.domain.budgets import DEFAULT
from cofferd.domain.errors import ValidationFailed
from cofferd.domain.filters import SearchFilters, parse_filters
from cofferd.domain.models import KB_KIND, KnowledgeBase, Passage, ReindexResult
from cofferd.infrastructure.storage.fts_text import unmark

PATH_MAX = 4096


class _Body(BaseModel):
    """Strict: no coercion (`true` is not a number, `0` is not a boolean), no unknown keys,
    no infinite or NaN numbers.

    An optional field may be left out (its default applies). null is a value only where
    docs/openapi.yaml lists it (`type: [string, "null"]`: the same as leaving it out);
    a field typed `Omittable[...]` refuses it."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


def _not_null(value: Any) -> Any:
    if value is None:
        raise ValueError("must not be null; leave it out instead")
    return value


T = TypeVar("T")
Omittable = Annotated[T | None, BeforeValidator(_not_null)]  # absent: None; null: refused


class CreateKB(_Body):
    name: str = Field(min_length=1, max_length=64)
    config: dict[str, Any] = Field(default_factory=dict)
    path: str | None = Field(default=None, min_length=1, max_length=PATH_MAX)  # attach it


class AttachKB(_Body):
    path: Omittable[str] = Field(default=None, min_length=1, max_length=PATH_MAX)  # else: its link


class UpdateKB(_Body):
    config: dict[str, Any]


class Filters(_Body):
    """The shape of search filters; their meaning is checked by `parse_filters`."""

    folder: str | None = None
    tags: list[str] | None = None
    updated_after: str | None = None
    updated_before: str | None = None
    source_mode: str | None = None
    format: list[str] | None = None


class SearchRequest(_Body):
    query: str = Field(min_length=1)
    top_k: int = TOP_K_DEFAULT
    filters: Filters | None = None
    mode: Literal["keyword", "vector", "hybrid"] | None = None  # else each KB's default

    def search_filters(self) -> SearchFilters:
        return parse_filters(self.filters.model_dump(exclude_none=True) if self.filters else None)


class SearchAllRequest(SearchRequest):
    knowledge_bases: list[str] | None = Field(default=None, min_length=1, max_length=100)


class GrepRequest(_Body):
    pattern: str = Field(min_length=1)
    max_matches: int = MAX_MATCHES_DEFAULT
    ignore_case: bool = False


class OpenWeb(_Body):
    """What `cofferctl web` asks: the port (else the one it is on, or a free one) and the
    knowledge base the page starts on."""

    port: Omittable[int] = Field(default=None, ge=1, le=65535)
    kb: Omittable[str] = Field(default=None, min_length=1, max_length=64)


class EditDocument(_Body):
    content: str
    # refuse if the file changed since it was read
    expected_sha256: Omittable[str] = Field(default=None, pattern="^[0-9a-f]{64}$")


class InspectNote(_Body):
    """A note as an editor holds it: where it is in the KB, and its text (saved or not)."""

    relative_path: str = Field(min_length=1, max_length=PATH_MAX)
    text: str = Field(max_length=DEFAULT.indexed_bytes)


class Invocation(_Body):
    client: str = Field(min_length=1, max_length=100)
    tool: str = Field(min_length=1, max_length=100)
    duration_ms: float = Field(ge=0)
    outcome: str = Field(min_length=1, max_length=100)


class AddDocument(_Body):
    """Either `source_path` (a file on this machine, tracked for check-sources) or
    `content` (Markdown written directly)."""

    source_path: Omittable[str] = Field(default=None, min_length=1, max_length=PATH_MAX)
    track_source: bool = True  # remember source_path for check-sources (not for agents)
    content: Omittable[str] = None
    title: str | None = Field(default=None, max_length=500)
    replace: bool = False
    # the KB's folder a new document goes into ("": its top); absent: the KB's add_folder
    folder: Omittable[str] = Field(default=None, max_length=PATH_MAX)


_FLAGS = {"1": True, "true": True, "yes": True, "on": True,
          "0": False, "false": False, "no": False, "off": False}  # fmt: skip


def flag(value: str | None, field: str) -> bool:
    """A boolean query or form value (`true`/`false`, `1`/`0`, `yes`/`no`, `on`/`off`);
    False when absent."""
    if value is None:
        return False
    try:
        return _FLAGS[value.strip().lower()]
    except KeyError:
        raise ValidationFailed(f"{field} must be true or false", field=field) from None


# -- JSON shapes -------------------------------------------------------------------------

# Responses are strict JSON: a stored infinity or NaN fails loudly instead of answering text
# that no JSON parser accepts.
json_response = partial(web.json_response, dumps=partial(json.dumps, allow_nan=False))


def kb_json(kb: KnowledgeBase) -> dict[str, Any]:
    return kb.snapshot()


def document_json(view: DocumentView) -> dict[str, Any]:
    d = view.document
    out: dict[str, Any] = {
        "id": d.id,
        "kind": d.kind,
        "knowledge_base": d.resource_name,
        "title": d.title,
        "description": d.description,
        "path": view.path,
        "relative_path": d.path,
        "folder_path": view.folder_path,
        "source_mode": d.source_mode,
        "content_sha256": d.content_sha256,
        "embed_pending": d.embed_pending,
        "tags": list(d.tags),
        "aliases": list(d.aliases),
        "metadata": d.metadata,
        "created_at": d.created_at,
        "updated_at": d.updated_at,
    }
    if view.body is not None:
        out["content"] = view.body
        out["frontmatter"] = view.frontmatter or {}
    if view.file_text is not None:
        out["file_text"] = view.file_text
    if view.derived:
        out["derived"] = True
    return out


def passage_json(p: Passage) -> dict[str, Any]:
    snippet, highlights = split_highlights(p.snippet)
    return {
        "document_id": p.document_id,
        "knowledge_base": p.knowledge_base,
        "title": p.title,
        "text": p.text,
        "score": p.score,
        "position": p.position,
        "path": p.file,
        "relative_path": p.path,
        "line_start": p.line_start,
        "line_end": p.line_end,
        "heading": list(p.heading),
        "snippet": snippet,
        "highlights": highlights,
        **({"page": p.page, "location": p.location} if p.page is not None else {}),
    }


def split_highlights(marked: str) -> tuple[str, list[list[int]]]:
    """Plain snippet text plus [start, end) offsets of the matched terms."""
    plain, spans = unmark(marked)
    return plain, [list(span) for span in spans]


def ingest_json(result: IngestResult) -> dict[str, Any]:
    return {
        "status": result.status,
        "message": result.message,
        "document": document_json(result.document),
    }


def trashed_json(trashed: Trashed) -> dict[str, Any]:
    entry = trashed.entry
    return {
        "id": entry.id,
        "document_id": entry.document_id,
        "relative_path": entry.relative_path,
        "title": entry.title,
        "deleted_at": entry.deleted_at,
        "expires_at": trashed.expires_at,
        "has_original": entry.original is not None,
    }


def reindex_json(result: ReindexResult | None) -> dict[str, Any] | None:
    return result.as_dict() if result else None


def resource_json(kb: KnowledgeBase) -> dict[str, Any]:
    return {"kind": KB_KIND, "name": kb.name, "enabled": kb.enabled, "config": kb_json(kb)}
