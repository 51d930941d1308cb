"""Preparing documents for the index: what is asked of a worker, and what it answers.

A worker process reads a file, decodes it, reads its frontmatter, links and tags, chunks
it and prepares the text FTS5 stores; the daemon's writer then stores what it answers.
These values cross the process boundary (pickled), so they hold plain data only; those
sent back have no slots (they unpickle twice as fast).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from cofferd.domain.budgets import DEFAULT, Budget
from cofferd.domain.file_records import FileStat
from cofferd.domain.index_records import DocumentWrite, IndexedFile


@dataclass(frozen=True, slots=True)
class PrepareSettings:
    """What preparing a document of one KB depends on."""

    kb: str
    chunk_size: int
    chunk_overlap: int
    chunking: str  # the KB's chunking key, stored with each document
    max_markdown_bytes: int  # a larger file is skipped as too large
    vector_enabled: bool
    budget: Budget = DEFAULT
    derived: str = ""  # the KB's folder of converted text (Locations.derived_dir)
    data_home: str = ""  # the data home: derived/ is walked from it through no link
    max_document_bytes: int = 0  # a larger original is not converted (0: no limit)


@dataclass(frozen=True, slots=True)
class PrepareItem:
    path: str
    size: int  # as the scan saw it: work is shared out by size
    known: IndexedFile | None  # what the index holds for it now


@dataclass(frozen=True)
class Gone:
    """Not there to read any more (deleted, or now a link)."""

    path: str


@dataclass(frozen=True)
class Unchanged:
    """Its bytes are what the index holds: only its size and time are new."""

    path: str
    stat: FileStat


@dataclass(frozen=True)
class Skipped:
    """Not indexed, for `reason`. `stat` is None when it should be tried again at the next
    pass (it could not be read), else the stat it had (tried again once it changes)."""

    path: str
    stat: FileStat | None
    reason: str


@dataclass(frozen=True)
class Unconverted:
    """A document in another format whose bytes have no converted text kept yet: to be
    converted (off the index's way), then prepared again."""

    path: str
    stat: FileStat
    digest: str


@dataclass(frozen=True)
class Failed:
    """Preparing it failed in a way that is not the file's to say (a worker over its time,
    or one it crashed again and again): skipped until the file changes; or, not `lasting`,
    through no fault of its own (its workers killed from outside): tried again next pass.
    Either way the version indexed before stays in the index."""

    path: str
    reason: str
    lasting: bool = True


Outcome = Gone | Unchanged | Skipped | Unconverted | Failed | DocumentWrite


class Preparer(Protocol):
    def prepare(
        self,
        kb: str,
        settings: PrepareSettings,
        items: Sequence[PrepareItem],
        *,
        interactive: bool,
    ) -> AsyncIterator[Outcome]:
        """Each item's outcome, in the order they are ready. Interactive work (a save, an
        API write) goes before bulk work (a full reconcile)."""
        ...
