"""Reading a document's bytes from its docs tree, confined to the tree: never through a
symlink (the file itself is opened with O_NOFOLLOW; its folder must really be inside the
tree's root), and read again while a save is in progress.

Standard library only: the daemon and its worker processes both read through here.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import unicodedata
from pathlib import Path
from typing import BinaryIO

from coffer_kernel.locations import check_relpath
from cofferd.domain.file_records import FileContent, FileStat

READ_ATTEMPTS = 5
BLOCK = 1024 * 1024
CHANGING = FileStat(-1, 0)  # the stat of a file that changed while it was read


def stat_of(st: os.stat_result) -> FileStat:
    return FileStat(size=st.st_size, mtime_ns=st.st_mtime_ns)


def inside(target: str, root: str) -> bool:
    return target == root or target.startswith(root + os.sep)


def disk_path(docs: Path, relpath: str) -> Path:
    """Where a document really is. Index keys are NFC; a name synced from macOS may be
    stored decomposed (NFD), which Linux treats as a different name."""
    path = docs / check_relpath(relpath)
    if relpath.isascii():
        return path
    if not os.path.lexists(path):
        decomposed = docs / unicodedata.normalize("NFD", relpath)
        if decomposed != path and os.path.lexists(decomposed):
            return decomposed
    return path


class TreeReader:
    """Reads documents of one docs tree; each folder is checked to be inside the tree
    once per reader (a reader lives for one batch, on one thread)."""

    def __init__(self, docs: Path) -> None:
        self.docs = docs
        self.root = os.path.realpath(docs)
        self._folders: dict[Path, bool] = {}

    def read(
        self, relpath: str, limit: int | None = None, sink: BinaryIO | None = None
    ) -> FileContent | None:
        """The file's bytes (only the first `limit` of them, when given; the digest is
        always of the whole file), or None when it is not there, is a link, or lies
        outside the tree. With a `sink`, every byte is written there instead (a copy)."""
        path = disk_path(self.docs, relpath)
        folder_inside = self._folders.get(path.parent)
        if folder_inside is None:
            folder_inside = inside(os.path.realpath(path.parent), self.root)
            self._folders[path.parent] = folder_inside
        if not folder_inside:
            return None
        content: FileContent | None = None
        for _ in range(READ_ATTEMPTS):
            try:
                if sink is not None:
                    sink.seek(0)
                    sink.truncate()
                content = read_once(path, limit, sink)
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                return None
            if content is None or content.stat != CHANGING:
                return content
        return content


def read_once(
    path: Path, limit: int | None = None, sink: BinaryIO | None = None
) -> FileContent | None:
    """One read of the file; None when it is a symlink (ELOOP under O_NOFOLLOW) or not a
    regular file. A write during the read shows as the stat CHANGING."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return None
        raise
    with os.fdopen(fd, "rb") as fh:
        first = os.fstat(fd)
        if not stat.S_ISREG(first.st_mode):
            return None  # a FIFO or a device swapped in: never read (it could block)
        before = stat_of(first)
        digest = hashlib.sha256()
        kept: list[bytes] = []
        held = 0
        size = 0
        while block := fh.read(BLOCK):
            digest.update(block)
            size += len(block)
            if sink is not None:
                sink.write(block)
            elif limit is None or held < limit:
                kept.append(block if limit is None else block[: limit - held])
                held += len(kept[-1])
        after = stat_of(os.fstat(fd))
    return FileContent(
        data=b"".join(kept),
        stat=before if after == before else CHANGING,
        digest=digest.hexdigest(),
        size=size,
    )
