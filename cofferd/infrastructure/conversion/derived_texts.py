"""Text converted from documents indexed where they lie (PDF, Word, slides...), kept in the
data home by the content hash of each original: an unchanged file is never converted
again, and a renamed or copied one finds its text at once. A conversion that failed is
kept too (`.failed`, its reason), so a damaged file is not tried at every start, only
once its bytes change; one stopped for its time or by a crash (`.retry`) is tried again
a day later. Derived data like the index: deleting it only costs time.

Standard library only: the prepare workers read it.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from cofferd.infrastructure.files.durable import atomic_write

_DIGEST = re.compile(r"[0-9a-f]{64}")
TEXT, FAILED, RETRY = ".md", ".failed", ".retry"
RETRY_AFTER_S = 24 * 3600.0
STRAY_S = 3600.0  # a write's temporary file older than this was left by a kill
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def entry(folder: Path, digest: str, kind: str) -> Path:
    """Where the text (or failure) of the original with this SHA-256 is kept."""
    if not _DIGEST.fullmatch(digest):
        raise ValueError(f"not a SHA-256 digest: {digest[:80]!r}")
    return folder / digest[:2] / f"{digest}{kind}"


def failure(folder: Path, digest: str) -> tuple[str, bool] | None:
    """Why the original with this digest could not be converted, if it could not, and
    whether that lasts (`.failed`, not `.retry`)."""
    for kind in (FAILED, RETRY):
        found = read(folder, digest, kind, 4096)
        if found is not None:
            return found[0].decode("utf-8", "replace"), kind == FAILED
    return None


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
        data = text.encode("utf-8", "replace")  # a converter's lone surrogate is no text
        path = self._made(kb, digest, TEXT)
        atomic_write(path, data, mode=0o600)
        for kind in (FAILED, RETRY):
            path.with_suffix(kind).unlink(missing_ok=True)
        return len(data)

    def put_failure(self, kb: str, digest: str, reason: str, *, transient: bool = False) -> None:
        path = self._made(kb, digest, RETRY if transient else FAILED)
        atomic_write(path, reason.encode("utf-8", "replace"), mode=0o600)

    def failure(self, kb: str, digest: str) -> str | None:
        found = failure(self.folder_of(kb), digest)
        return None if found is None else found[0]

    def text(self, kb: str, digest: str, limit: int) -> str | None:
        found = read(self.folder_of(kb), digest, TEXT, limit)
        return None if found is None else found[0].decode("utf-8", "replace")

    def prune(
        self, kb: str, wanted: set[str], texts_before: float, failures_before: float
    ) -> tuple[int, set[str]]:
        """Forget the texts of originals no document has any more (`wanted`: those some
        have) written before `texts_before`, failures older than `failures_before` (the
        file that failed may still be there: it is tried once more), retries older than a
        day, and what a killed write left. Bytes freed, and the digests with a text kept."""
        freed, present = 0, set()
        now = time.time()
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            for shard in os.scandir(self.folder_of(kb)):
                if not shard.is_dir(follow_symlinks=False):
                    continue
                for item in os.scandir(shard.path):
                    digest, _, kind = item.name.partition(".")
                    found = item.stat(follow_symlinks=False)
                    if not digest:  # `.<name>.tmp`, a write's
                        stale = found.st_mtime < now - STRAY_S
                    elif not _DIGEST.fullmatch(digest):
                        continue
                    elif "." + kind == TEXT:
                        stale = digest not in wanted and found.st_mtime < texts_before
                        if not stale:
                            present.add(digest)
                    elif "." + kind == FAILED:
                        stale = digest not in wanted and found.st_mtime < failures_before
                    else:
                        stale = "." + kind == RETRY and found.st_mtime < now - RETRY_AFTER_S
                    if stale:
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(item.path)
                            freed += found.st_size
        return freed, present

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
