"""What the application layer needs from the outside world: the Protocols that
infrastructure implements. The values they pass are in file_records and index_records,
the failures they raise in failures."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from pathlib import Path
from typing import Any, BinaryIO, Protocol, TypeVar

from cofferd.domain.file_records import FileContent, FileStat, RawHit, TrashEntry, TreeScan
from cofferd.domain.filters import SearchFilters
from cofferd.domain.index_records import (
    Converted,
    DocumentWrite,
    EmbedJob,
    EmbedLane,
    GraphRows,
    IndexedFile,
    IndexedFiles,
    LinkRow,
    WriteFailure,
)
from cofferd.domain.models import Document, KnowledgeBase, Passage
from cofferd.domain.query_syntax import Query

T = TypeVar("T")


class TrashBin(Protocol):
    """Per-KB trash in the data home: files moved there whole, never copied and left."""

    def put(self, kb: str, entry: TrashEntry, original: Path | None) -> None:
        """Move the document at `entry.relative_path` (and its original) into the trash."""
        ...

    def entries(self, kb: str) -> list[TrashEntry]: ...

    def page(self, kb: str, limit: int, offset: int) -> tuple[list[TrashEntry], int]: ...

    def get(self, kb: str, trash_id: str) -> TrashEntry | None: ...

    def restore(self, kb: str, entry: TrashEntry) -> None: ...

    def purge(self, kb: str, trash_id: str) -> None: ...


class DocumentFormats(Protocol):
    """Which files `add` takes, and how an extension names a format."""

    def file_format(self, filename: str) -> str: ...

    def is_passthrough(self, fmt: str) -> bool: ...

    def supported_formats(self) -> list[str]: ...


class DocsTree(Protocol):
    def scan(self, kb: str, under: str = "") -> TreeScan: ...

    def read(self, kb: str, relpath: str, sink: BinaryIO | None = None) -> FileContent | None: ...

    def stat(self, kb: str, relpath: str) -> FileStat | None: ...

    def absolute(self, kb: str, relpath: str) -> str: ...

    def within(self, kb: str, path: Path) -> str | None:
        """Where the file at `path` (real) is inside the KB's tree, if it is there."""
        ...

    def places(self, kb: str, relpaths: Iterable[str]) -> dict[str, str]: ...

    def write(self, kb: str, relpath: str, data: bytes) -> None: ...

    def create(self, kb: str, folder: str, stem: str, data: bytes) -> str: ...

    def remove(self, kb: str, relpath: str) -> None: ...

    def remove_originals(self, kb: str, doc_id: str) -> None: ...

    def keep_original(self, kb: str, doc_id: str, ext: str, source: Path) -> None: ...

    def original(self, kb: str, doc_id: str) -> Path | None: ...


class DocumentIndex(Protocol):
    """What is indexed of a KB's files, and the one write path (the Reindexer's)."""

    async def indexed_files(
        self, kb: str, chunking: str, paths: Sequence[str] | None = None
    ) -> IndexedFiles: ...

    async def indexed_details(self, kb: str, paths: Sequence[str]) -> dict[str, IndexedFile]: ...

    async def apply(
        self,
        kb: str,
        writes: Sequence[DocumentWrite],
        removed: Sequence[str],
        restat: Sequence[tuple[str, FileStat]],
        actor: str,
    ) -> list[WriteFailure]: ...

    async def degraded(
        self, kb: str, first: int, among: Sequence[str]
    ) -> tuple[list[tuple[str, list[str]]], int, int]:
        """(path, why) of the `first` documents by path indexed in a bounded form (over a
        budget); how many there are; and how many of them are at the paths `among`."""
        ...

    async def reclaim(self, *, large_work: bool = False, whole: bool = False) -> int:
        """Give the space of removed rows back to the file system (once there is enough of
        it, or all of it: `whole`), and after large work the memory it left; bytes freed."""
        ...

    async def bulk_load(self, kb: str) -> None:
        """Before a pass that writes many documents (merge_keyword_index follows it): the
        KB's keyword index leaves the pieces it writes unmerged until then."""
        ...

    async def merge_keyword_index(self, kb: str) -> None:
        """After bulk writes: the KB's keyword index made one piece again (every query
        reads each piece), in steps that let other writes through; then pieces merge as
        they are written again."""
        ...


class DocumentRemoval(Protocol):
    """A document's rows dropped at once (it went to the trash)."""

    async def delete_document(self, kb: str, doc_id: str, actor: str) -> bool: ...


class KBIndex(Protocol):
    """A knowledge base's index as a whole: its counts, and dropping it."""

    async def metrics(self, kb: str) -> dict[str, int]: ...

    async def formats(self, kb: str) -> dict[str, int]:
        """How many documents of each format (domain.formats) the KB holds."""
        ...

    async def converted_files(self, kb: str) -> dict[str, list[str]]:
        """The paths of the KB's converted documents by the content digest of their files."""
        ...

    async def delete_kb(self, kb: str) -> int: ...


class DocumentCatalog(Protocol):
    """Documents as indexed: by reference, by path, by metadata, listed."""

    async def find_documents(self, kb: str, ref: str) -> list[Document]: ...

    async def document_names(self, kb: str, like: str | None = None) -> list[tuple[str, str, str]]:
        """(id, path, title) of every document: what people may call one; with `like`, of
        those whose path holds it or whose title is it (any ASCII case): a few, found fast."""
        ...

    async def set_aside_titles(self, kb: str, title: str) -> list[tuple[str, str, str]]:
        """(id, path, title) of the documents that give themselves `title` and go by their
        first heading instead, as another document gives itself that title too
        (domain.title_choice): what the title names when no document goes by it."""
        ...

    async def merge_conflicts(self, kb: str) -> list[Document]: ...

    async def list_documents(
        self, kb: str, *, q: str | None, limit: int, offset: int
    ) -> tuple[list[Document], int]: ...

    async def document_ids(self, kb: str, paths: Sequence[str]) -> dict[str, str]: ...

    async def find_by_metadata(
        self, kb: str, key: str, value: str | None = None
    ) -> list[Document]: ...


class KeywordSearch(Protocol):
    async def keyword_search(
        self,
        kb: str,
        query: Query,
        top_k: int,
        filters: SearchFilters | None = None,
        *,
        beside: bool = False,
    ) -> list[Passage]:
        """`query` as the search parsed it (once, for every port that answers it).
        `beside`: another read runs beside this search (hybrid's vector list), so it
        keeps to one reader."""
        ...


class TrackedSources(Protocol):
    """The originals this machine tracks, by document id (path ingest's check-sources)."""

    async def track_source(self, kb: str, doc_id: str, source_path: str) -> None: ...

    async def tracked_sources(self, kb: str) -> dict[str, str]: ...


class ActivityLog(Protocol):
    """The audit trail and the MCP tool-call log."""

    async def audit(
        self, event: str, actor: str, kb: str | None, doc_id: str | None, details: dict[str, Any]
    ) -> None: ...

    async def audit_log(
        self, kb: str | None, limit: int, *, event: str | None = None, actor: str | None = None
    ) -> list[dict[str, Any]]: ...

    async def record_invocation(
        self, client: str, tool: str, duration_ms: float, outcome: str
    ) -> None: ...

    async def invocations(
        self, limit: int, *, client: str | None = None, tool: str | None = None
    ) -> list[dict[str, Any]]: ...


class KBRepository(Protocol):
    """Knowledge bases as folders with their settings file."""

    def names(self) -> list[str]: ...

    def refusals(self) -> dict[str, str]: ...

    def refusal(self, name: str) -> str | None: ...

    def load(self, name: str) -> KnowledgeBase | None: ...

    def has_settings(self, name: str) -> bool: ...

    def save(self, kb: KnowledgeBase) -> None: ...

    def create_folders(self, name: str) -> None: ...

    def attach(self, name: str, folder: Path) -> None: ...

    def check_attachable(self, folder: Path, kb: str | None = None) -> Path: ...

    def reattach(self, name: str, folder: Path) -> None: ...

    def unrecorded_links(self) -> list[str] | None: ...

    def trust_existing_links(self, indexed: Collection[str]) -> None: ...

    def remove(self, name: str) -> None: ...

    def originals_bytes(self, name: str) -> int: ...


class Grepper(Protocol):
    async def grep(
        self, kb: str, pattern: str, max_matches: int, ignore_case: bool = False
    ) -> tuple[list[RawHit], bool]: ...


class MarkdownConverter(Protocol):
    engine: str

    def formats(self) -> tuple[str, ...]: ...

    async def convert(self, path: Path, fmt: str) -> Converted: ...

    def warm(self) -> None:
        """Get ready to convert (start what takes time to start): files are coming."""
        ...

    def status(self) -> dict[str, Any]:
        """The converter's processes, for the daemon's status."""
        ...

    async def interrupt(self) -> None:
        """Stop the conversion in flight at once (the daemon is stopping)."""
        ...

    async def close(self) -> None: ...


class DerivedTextStore(Protocol):
    """Text converted from documents indexed where they lie, by the digest of the
    original's bytes (infrastructure.derived_texts)."""

    def put(self, kb: str, digest: str, text: str) -> int: ...

    def put_failure(
        self, kb: str, digest: str, reason: str, *, transient: bool = False
    ) -> None: ...

    def failure(self, kb: str, digest: str) -> str | None: ...

    def text(self, kb: str, digest: str, limit: int) -> str | None: ...

    def prune(
        self, kb: str, wanted: set[str], texts_before: float, failures_before: float
    ) -> tuple[int, set[str]]: ...

    def remove_kb(self, kb: str) -> None: ...


class ScratchFolder(Protocol):
    """A private folder of the data home for copies of originals while they convert,
    reached through no link (infrastructure.files.confinement.HomeScratch)."""

    def clear(self) -> None:
        """Remove what is there (copies a kill left); nothing outside it, ever."""
        ...

    def new_file(self, suffix: str) -> tuple[int, Path]:
        """A new private file there: its handle, open for writing, and its path."""
        ...


class Embedder(Protocol):
    dimensions: int

    async def embed(self, texts: Sequence[str], *, lane: EmbedLane) -> list[list[float]]:
        """The texts' vectors: passages to store (a save's or bulk work's, `lane`), or
        (EmbedLane.QUERY) a search's words, which a model such as e5 reads with another
        prefix."""
        ...

    async def close(self) -> None: ...


class VectorStore(Protocol):
    async def vectors_available(self) -> bool: ...

    async def pending_embeds(self, kb: str, limit: int, now: float) -> list[EmbedJob]: ...

    async def owed_chunks(self, kb: str) -> int:
        """How many chunks the KB's documents that owe vectors have (due or not)."""
        ...

    async def text_sample(self, kb: str, limit: int) -> list[str]:
        """The text of up to `limit` of the KB's chunks, picked at random."""
        ...

    async def store_vectors(
        self,
        kb: str,
        model: str,
        dimensions: int,
        done: Sequence[tuple[EmbedJob, Sequence[Sequence[float]]]],
    ) -> int: ...

    async def embed_failed(
        self, kb: str, doc_ids: Sequence[str], error: str, retry_at: float
    ) -> None: ...

    async def reset_vectors(
        self, kb: str, pending: bool, model: str | None = None, dims: int | None = None
    ) -> None: ...

    async def retry_embeds_now(self, kb: str) -> None: ...

    async def vector_model(self, kb: str) -> tuple[str, int] | None: ...

    async def vector_search(
        self,
        kb: str,
        vector: Sequence[float],
        top_k: int,
        filters: SearchFilters | None = None,
        min_similarity: float = -1.0,
        syntax: Query | None = None,
    ) -> list[Passage]:
        """The nearest chunks the filters allow that hold the query's phrases and none of
        what it excludes (`syntax`), as passages scored by cosine similarity."""
        ...


class GraphStore(Protocol):
    """Tags and links as stored with their documents."""

    async def links_from(self, kb: str, doc_id: str) -> list[LinkRow]: ...

    async def links_named(self, kb: str, names: Sequence[str]) -> list[LinkRow]: ...

    async def all_links(self, kb: str) -> list[LinkRow]: ...

    async def document_paths(self, kb: str) -> dict[str, str]: ...

    async def document_changes(self) -> dict[str, int]:
        """A count per KB that grows with every change to its documents' paths, titles,
        aliases or times: what was read of them is good while the count stays."""
        ...

    async def names(self, kb: str) -> list[tuple[str, str, str, str]]: ...

    async def links_sample(self, kb: str, limit: int) -> list[tuple[str, str]]: ...

    async def path_page(self, kb: str, limit: int, offset: int) -> tuple[list[str], int]: ...

    async def tag_counts(
        self, kb: str, limit: int, offset: int
    ) -> tuple[list[tuple[str, int]], int]: ...

    async def graph(self, kb: str, draw: Callable[[GraphRows], T]) -> T:
        """`draw(rows)` of the KB's documents and links, run where they are read (off the
        serving loop), its links streamed."""
        ...
