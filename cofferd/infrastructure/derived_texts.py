"""Text converted from documents indexed where they lie (PDF, Word, slides...), kept in the
data home by the content hash of each original: an unchanged file is never converted
again, and a renamed or copied one finds its text at once. A conversion that failed is
kept too (`.failed`, its reason), so a damaged file is not tried at every start, only
once its bytes change. Derived data like the index: deleting it only costs time.

Standard library only: the prepare workers read it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from cofferd.infrastructure.fsutil import atomic_write

_DIGEST = re.compile(r"[0-9a-f]{64}")
TEXT, FAILED = ".md", ".failed"
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def entry(folder: Path, digest: str, kind: str) -> Path:
    """Where the text (or failure) of the original with this SHA-256 is kept."""
    if not _DIGEST.fullmatch(digest):
        raise ValueError(f"not a SHA-256 digest: {digest[:80]!r}")
    return folder / digest[:2] / f"{digest}{kind}"


def read(folder: Path, digest: str, kind: str, limit: int) -> tuple[bytes, int] | None:
    """The first `limit` bytes kept and the size of all, or None when nothing is kept
    (never read through a link)."""
    try:
        fd = os.open(entry(folder, digest, kind), _READ_FLAGS)
    except (FileNotFoundError, NotADirectoryError):
        return None
    with os.fdopen(fd, "rb") as fh:
        return fh.read(limit), os.fstat(fd).st_size


class DerivedTexts:
    """The derived texts of every KB (`Locations.derived_dir`)."""

    def __init__(self, folder_of: Callable[[str], Path]) -> None:
        self.folder_of = folder_of

    def put(self, kb: str, digest: str, text: str) -> int:
        """Keep the text converted from this original (durable: written and synced beside,
        then renamed); a failure kept before goes. Bytes written."""
        data = text.encode("utf-8")
        path = self._made(kb, digest, TEXT)
        atomic_write(path, data, mode=0o600)
        path.with_suffix(FAILED).unlink(missing_ok=True)
        return len(data)

    def put_failure(self, kb: str, digest: str, reason: str) -> None:
        atomic_write(self._made(kb, digest, FAILED), reason.encode("utf-8"), mode=0o600)

    def failure(self, kb: str, digest: str) -> str | None:
        found = read(self.folder_of(kb), digest, FAILED, 4096)
        return None if found is None else found[0].decode("utf-8", "replace")

    def text(self, kb: str, digest: str, limit: int) -> str | None:
        found = read(self.folder_of(kb), digest, TEXT, limit)
        return None if found is None else found[0].decode("utf-8", "replace")

    def prune(self, kb: str, wanted: set[str], failures_before: float) -> int:
        """Forget the texts of originals no document has any more (`wanted`: those some
        have), and failures older than `failures_before` (a time: the file that failed
        may still be there, and is then tried once more). Bytes freed."""
        freed = 0
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            for shard in os.scandir(self.folder_of(kb)):
                if not shard.is_dir(follow_symlinks=False):
                    continue
                for item in os.scandir(shard.path):
                    digest, _, kind = item.name.partition(".")
                    if digest in wanted or not _DIGEST.fullmatch(digest):
                        continue
                    found = item.stat(follow_symlinks=False)
                    if "." + kind == TEXT or (
                        "." + kind == FAILED and found.st_mtime < failures_before
                    ):
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(item.path)
                            freed += found.st_size
        return freed

    def remove_kb(self, kb: str) -> None:
        shutil.rmtree(self.folder_of(kb), ignore_errors=True)

    def _made(self, kb: str, digest: str, kind: str) -> Path:
        path = entry(self.folder_of(kb), digest, kind)
        for folder in (path.parent.parent.parent, path.parent.parent, path.parent):
            with contextlib.suppress(FileExistsError):
                folder.mkdir(mode=0o700)
            if folder.is_symlink() or not folder.is_dir():
                raise OSError(f"{folder} is not a folder: derived text is not kept there")
        return path
