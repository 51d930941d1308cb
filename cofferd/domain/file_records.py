"""What the file system tells about documents: stats, a scan of a tree, a file's bytes, a
trash entry, a grep hit. Plain values passed between the ports and the application."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from cofferd.domain.conflicts import ConflictCopy


class FileStat(NamedTuple):
    """A file's size and modification time: what tells a changed file. A tuple: a full
    reconcile makes one per file, hundreds of thousands, and compares them all."""

    size: int
    mtime_ns: int


# Per KB: held as link targets (application/other_files.py), about 125 bytes a file with its
# path, and 100 more in the index links resolve against (23 MB for 100,000 files)
OTHER_FILES_LISTED = 100_000


@dataclass(frozen=True)
class TreeScan:
    """Markdown files under a docs tree by relative POSIX path, and the folders that failed.

    A file's stat is a plain (size, mtime_ns) tuple, equal to its FileStat: a scan holds
    one per file, and plain tuples of numbers are left alone by the garbage collector
    (a FileStat, a tuple subclass, is not; hundreds of thousands slow every collection).
    """

    files: Mapping[str, tuple[int, int]]
    failed_dirs: Sequence[str]
    unusable: Mapping[str, str] = field(default_factory=dict)  # path -> why it is skipped
    conflicts: Mapping[str, ConflictCopy] = field(default_factory=dict)  # sync tools' copies
    # the other files (images, canvases: not documents), links' targets; at most
    # OTHER_FILES_LISTED of them, those beyond counted in `other_files_left_out`
    other_files: Sequence[str] = ()
    other_files_left_out: int = 0

    def covers(self, relpath: str) -> bool:
        """False when the file's folder could not be read: its absence proves nothing."""
        return not any(relpath.startswith(d + "/") or d == "" for d in self.failed_dirs)


@dataclass(frozen=True)
class FileContent:
    data: bytes  # the file's bytes, or only their beginning when read up to a limit
    stat: FileStat
    digest: str  # sha256 of the whole file
    size: int  # bytes of the whole file

    @property
    def cut(self) -> bool:
        return len(self.data) < self.size


@dataclass(frozen=True)
class TrashEntry:
    """A deleted document kept in its knowledge base's trash."""

    id: str
    document_id: str
    relative_path: str
    title: str
    deleted_at: str
    original: str | None = None  # the kept original's file name in raw/, if it was moved too
    source_path: str | None = None  # the file this machine tracked for check-sources
    # of a document converted from its file (a PDF): its text stays kept while it is here
    content_sha256: str | None = None


@dataclass(frozen=True)
class RawHit:
    path: str  # relative to the KB's docs/
    line_number: int  # in a converted document's page (slide, sheet): the line within it
    line: str
    page: int | None = None  # that page's ordinal from 1, and where it is ("page iv")
    location: str | None = None
