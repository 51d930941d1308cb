"""What the index holds of a document and what is written to it: indexed files and their
stats, prepared chunks and writes, documents owing vectors and the lane their texts take,
link rows, converted text."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

from cofferd.domain.file_records import FileStat
from cofferd.domain.links import Link
from cofferd.domain.models import Document


@dataclass(frozen=True, slots=True)
class IndexedFile:
    """What the index remembers about one file, enough to decide whether to read it again."""

    document_id: str
    stat: FileStat
    content_sha256: str
    chunking: str


# A row of IndexedFiles: (path, size, mtime_ns), the time None when the document was
# chunked another way than the KB chunks now (so it never matches a file's).
IndexedRow = tuple[str, int, int | None]


class IndexedFiles:
    """Which files the index holds, by path, and as they were when indexed: all a pass
    over an unchanged KB compares, kept as the rows were read (no object per file). What
    else the index remembers of a file (IndexedFile) is read for the few looked at
    closer."""

    __slots__ = ("_rows",)

    def __init__(self, rows: Iterable[IndexedRow]) -> None:
        self._rows = {row[0]: row for row in rows}

    def __iter__(self) -> Iterator[str]:
        return iter(self._rows)

    def __len__(self) -> int:
        return len(self._rows)

    def __contains__(self, path: object) -> bool:
        return path in self._rows

    def changed(
        self, files: Mapping[str, tuple[int, int]], too_large: Callable[[str, int], bool]
    ) -> list[str]:
        """The paths of `files` not indexed as they are now: new, of another size or time,
        or chunked another way; or indexed but `too_large` now (its KB's limit lowered)."""
        rows = self._rows
        found = []
        for path, (size, mtime_ns) in files.items():
            row = rows.get(path)
            if row is None or row[1] != size or row[2] != mtime_ns or too_large(path, size):
                found.append(path)
        return found

    def gone(self, files: Mapping[str, object]) -> list[str]:
        """The indexed paths that are not among `files`."""
        return [path for path in self._rows if path not in files]


@dataclass(frozen=True)  # no slots: unpickled (from a worker) twice as fast
class IndexedChunk:
    """A chunk as stored: where it is, its heading path (as JSON, as the chunks table holds
    it: made by the worker, not by the one writer), and its text and heading path as FTS5
    indexes them (fts_text.index_text)."""

    position: int
    heading_json: str
    line_start: int
    line_end: int
    fts_text: str
    fts_heading: str


@dataclass(frozen=True)
class DocumentWrite:
    """A prepared document, ready for the writer."""

    document: Document
    stat: FileStat
    chunking: str
    chunks: Sequence[IndexedChunk]
    event: str
    links: Sequence[Link] = ()
    fts_meta: str = ""  # title, aliases and tags, as FTS5 indexes them
    degraded: tuple[str, ...] = ()  # the budgets it was held to (also in its metadata)
    # a converted document's first heading where it says other than the title it gives
    # itself: its title while another document gives itself that one (domain.title_choice)
    heading_title: str | None = None

    @property
    def path(self) -> str:
        return self.document.path


@dataclass(frozen=True)
class WriteFailure:
    """A document the index could not store (the rest of its batch was stored)."""

    path: str
    stat: FileStat
    reason: str


@dataclass(frozen=True)
class Converted:
    """A converted document as the converter's process made it: the Markdown kept of it
    (frontmatter, then its text, each page, slide or sheet under its mark), its own title
    when that is a real one, and how many pages (slides, sheets) were marked."""

    markdown: str
    title: str | None
    pages: int = 0


@dataclass(frozen=True)
class EmbedJob:
    """A document that owes vectors: its chunks' ids and the text to embed."""

    document_id: str
    content_sha256: str
    chunking: str
    chunks: Sequence[tuple[str, str]]


class EmbedLane(Enum):
    """What kind of work an embedding is, which its caller says (the model's process
    serves them in this order): a search's query, always first; a save's texts (what a
    save or an API write just wrote to a knowledge base); bulk work (a catch-up, a pass
    over many files, a model switch's whole KB), shared between knowledge bases in turn."""

    QUERY = "query"
    SAVE = "save"
    BULK = "bulk"


LinkRow = tuple[str, str, Link]  # (the linking document's id, its path, the link)


@dataclass(frozen=True)
class GraphRows:
    """What a KB's graph is drawn from, as stored: the links read as they are used (a KB may
    hold millions: never all at once)."""

    documents: list[tuple[str, str, str, str | None]]  # id, path, title, its tags newline-joined
    links: Iterable[
        tuple[str, str, str | None, str, str | None]
    ]  # source id, type, key, target, alias
