"""Value objects shared by every layer."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # not at run time: worker processes import this module without pydantic
    from cofferd.domain.config import KnowledgeBaseConfig, RetrievalMode

KB_KIND = "knowledge_base"
WORKSPACE_GLOBAL = "00000000000000000000000000"


def utc_now() -> str:
    return utc_text(datetime.now(UTC))


def utc_text(moment: datetime) -> str:
    """The one form times are stored and compared in: `2026-12-02T22:03:23.000Z`."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def utc_from_ns(ns: int) -> str:
    return utc_text(datetime.fromtimestamp(ns / 1e9, UTC))


@dataclass(frozen=True)
class KnowledgeBase:
    name: str
    config: KnowledgeBaseConfig
    enabled: bool
    created_at: str
    settings_error: str | None = None  # kb.yaml could not be read: defaults are in use
    ignored_settings: tuple[str, ...] = ()  # machine-local keys its folder carried: unused
    attached: str | None = None  # the user's folder it indexes in place, if any

    def snapshot(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": KB_KIND,
            "enabled": self.enabled,
            "created_at": self.created_at,
            "config": self.config.model_dump(mode="json"),
            **({"settings_error": self.settings_error} if self.settings_error else {}),
            **({"ignored_settings": list(self.ignored_settings)} if self.ignored_settings else {}),
            **({"attached": self.attached} if self.attached else {}),
        }


@dataclass(frozen=True)
class Document:
    id: str
    resource_name: str
    path: str
    title: str
    description: str | None
    content_sha256: str
    source_mode: str
    metadata: dict[str, Any]
    created_at: str
    updated_at: str
    embed_pending: bool = False
    kind: str = KB_KIND
    tags: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Chunk:
    position: int
    text: str
    heading: tuple[str, ...]
    line_start: int = 0  # in the file, from 1, frontmatter counted
    line_end: int = 0


@dataclass(frozen=True)
class Passage:
    document_id: str
    title: str
    text: str
    score: float
    position: int
    path: str
    heading: tuple[str, ...] = ()
    snippet: str = ""
    knowledge_base: str = ""
    line_start: int = 0
    line_end: int = 0
    file: str = ""  # the absolute path of the file, when known
    # where in `text` the snippet's first match is (where the snippet starts, if none)
    match_at: int = 0
    # of a PDF, a slide deck or a workbook: the page (slide, sheet) the passage's match is on
    # (a passage flows across pages), its ordinal from 1, and where it is as the document
    # names it ("page iv", "sheet Budget")
    page: int | None = None
    location: str | None = None


@dataclass(frozen=True)
class SearchResult:
    """`mode` is what answered; `fallback` why that is not the KB's own mode (None when it
    is): embedder_unavailable, language_not_covered, vectors_pending, no_provider,
    vectors_unavailable."""

    mode: RetrievalMode
    passages: Sequence[Passage]
    fallback: str | None = None
    query_cut: bool = False  # the query was over its budget: its first terms were searched


@dataclass(frozen=True)
class GrepHit:
    document_id: str | None
    path: str  # relative to the docs folder
    line_number: int  # in a converted document's page (slide, sheet): the line within it
    line: str
    file: str = ""  # the absolute path
    page: int | None = None  # as Passage.page and Passage.location
    location: str | None = None


@dataclass(frozen=True)
class GrepResult:
    hits: Sequence[GrepHit]
    truncated: bool


@dataclass
class ReindexResult:
    """Counts from one reconcile of a knowledge base."""

    scanned: int = 0
    documents_added: int = 0
    documents_updated: int = 0
    documents_unchanged: int = 0
    documents_removed: int = 0
    documents_skipped: int = 0
    documents_degraded: int = 0
    documents_converting: int = 0  # to be indexed once their text is converted
    skipped: list[dict[str, str]] = field(default_factory=list)

    def merge(self, other: ReindexResult) -> None:
        self.scanned += other.scanned
        self.documents_added += other.documents_added
        self.documents_updated += other.documents_updated
        self.documents_unchanged += other.documents_unchanged
        self.documents_removed += other.documents_removed
        self.documents_skipped += other.documents_skipped
        self.documents_degraded += other.documents_degraded
        self.documents_converting += other.documents_converting
        self.skipped += other.skipped

    @property
    def changed(self) -> bool:
        return bool(self.documents_added or self.documents_updated or self.documents_removed)

    def as_dict(self) -> dict[str, Any]:
        return {
            "scanned": self.scanned,
            "documents_added": self.documents_added,
            "documents_updated": self.documents_updated,
            "documents_unchanged": self.documents_unchanged,
            "documents_removed": self.documents_removed,
            "documents_skipped": self.documents_skipped,
            "documents_degraded": self.documents_degraded,
            "documents_converting": self.documents_converting,
            "skipped": self.skipped,
        }
