"""Text converted from documents indexed where they lie (PDF, Word, slides...), kept in the
data home by the content hash of each original: an unchanged file is never converted
again, and a renamed or copied one finds its text at once. A conversion that failed is
kept too (`.failed`, its reason), so a damaged file is not tried at every start, only
once its bytes change; one stopped for its time or by a crash (`.retry`) is tried again
a day later; one that said OCR was not installed, once it is (at the next pass that reads
the file: the daemon's next start). Derived data like the index: deleting it only costs
time.

Beside each text, `.sha256` holds the SHA-256 of the text itself, written by the daemon
with it, and the CONVERTED_BY mark of the conversion that made it: a text that does not
match it (edited by hand, or left half-written), or that an earlier conversion made, is
not kept, so the original is converted again rather than a text nobody converted, or an
older conversion's (pages from the converter's joins), indexed as its document. Every
folder here is reached from the data home through no link (confinement.home_folder) and
every file is opened without following a link or blocking, a regular file only: a FIFO
planted here never holds a reader.

Standard library only (and the confinement and ocr_engine modules, standard library too):
the prepare workers read it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import stat
import time
from collections.abc import Callable
from pathlib import Path

from coffer_kernel.locations import CONVERTED_TEXT
from cofferd.infrastructure.conversion import ocr_engine
from cofferd.infrastructure.files import dir_handles, durable
from cofferd.infrastructure.files.confinement import (
    ControlFileRefused,
    FolderRefused,
    home_folder,
    open_home_file,
    remove_home_folder,
)

_DIGEST = re.compile(r"[0-9a-f]{64}")
TEXT, FAILED, RETRY, TEXT_SUM = CONVERTED_TEXT, ".failed", ".retry", ".sha256"
RETRY_AFTER_S = 24 * 3600.0
STRAY_S = 3600.0  # a write's temporary file older than this was left by a kill
_PIECE = 1024 * 1024
# What made a kept text; a change to what conversion writes changes it, and every text made
# before is converted again once ("pages": page marks from the document, not the joins).
CONVERTED_BY = "pages"


def entry(folder: Path, digest: str, kind: str) -> Path:
    """Where the text (or failure) of the original with this SHA-256 is kept."""
    if not _DIGEST.fullmatch(digest):
        raise ValueError(f"not a SHA-256 digest: {digest[:80]!r}")
    return folder / digest[:2] / f"{digest}{kind}"


def failure(home: Path, folder: Path, digest: str) -> tuple[str, bool] | None:
    """Why the original with this digest could not be converted, if it could not, and
    whether that lasts (`.failed`, not `.retry`). None too for a failure that said OCR
    was not installed, now that it is: the original is converted again."""
    for kind in (FAILED, RETRY):
        found = read(home, folder, digest, kind, 4096)
        if found is not None:
            reason = found[0].decode("utf-8", "replace")
            if ocr_engine.MISSING in reason and ocr_engine.available():
                continue
            return reason, kind == FAILED
    return None


def read(home: Path, folder: Path, digest: str, kind: str, limit: int) -> tuple[bytes, int] | None:
    """The first `limit` bytes kept and the size of all, or None when nothing is kept (a
    text: nothing that matches its `.sha256`; anything but a regular file: a link, a FIFO,
    a folder, which a new text then replaces). OSError when a folder on the way is a link
    (confinement.FolderRefused) or cannot be read."""
    path = entry(folder, digest, kind)
    try:
        with home_folder(home, path.parent) as shard:
            if kind != TEXT:
                return _read(shard, path.name, limit, None)
            expected = _read(shard, path.with_suffix(TEXT_SUM).name, 128, None)
            digest_of_text, _, made_by = (
                expected[0].decode("ascii", "replace").partition(" ") if expected else ("", "", "")
            )
            if made_by != CONVERTED_BY:  # none, or an earlier conversion's
                return None
            return _read(shard, path.name, limit, digest_of_text)
    except (FileNotFoundError, NotADirectoryError, ControlFileRefused):
        return None


def _read(folder: int, name: str, limit: int, sha256: str | None) -> tuple[bytes, int] | None:
    """The first `limit` bytes of `name` and its size; with `sha256`, None unless the
    whole file has that digest (read in pieces, never held whole)."""
    fd = open_home_file(folder, name)
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as fh:
        if sha256 is None:
            return fh.read(limit), os.fstat(fd).st_size
        hashed, head, size = hashlib.sha256(), b"", 0
        while piece := fh.read(_PIECE):
            hashed.update(piece)
            if len(head) < limit:
                head += piece[: limit - len(head)]
            size += len(piece)
        return (head, size) if hashed.hexdigest() == sha256 else None


class DerivedTexts:
    """The derived texts of every KB (`Locations.derived_dir`), below the data home."""

    def __init__(self, home: Path, folder_of: Callable[[str], Path]) -> None:
        self.home = home
        self.folder_of = folder_of

    def put(self, kb: str, digest: str, text: str) -> int:
        """Keep the text converted from this original with its own digest (durable: each
        written and synced beside, then renamed, in a folder reached through no link); a
        failure kept before goes. Bytes written."""
        data = text.encode("utf-8", "replace")  # a converter's lone surrogate is no text
        path = entry(self.folder_of(kb), digest, TEXT)
        with home_folder(self.home, path.parent, make=True) as shard:
            durable.replace(shard, path.name, data, 0o600)
            own = f"{hashlib.sha256(data).hexdigest()} {CONVERTED_BY}".encode()
            durable.replace(shard, path.with_suffix(TEXT_SUM).name, own, 0o600)
            for kind in (FAILED, RETRY):
                dir_handles.unlink(shard, path.with_suffix(kind).name)
        return len(data)

    def put_failure(self, kb: str, digest: str, reason: str, *, transient: bool = False) -> None:
        path = entry(self.folder_of(kb), digest, RETRY if transient else FAILED)
        with home_folder(self.home, path.parent, make=True) as shard:
            durable.replace(shard, path.name, reason.encode("utf-8", "replace"), 0o600)

    def failure(self, kb: str, digest: str) -> str | None:
        found = failure(self.home, self.folder_of(kb), digest)
        return None if found is None else found[0]

    def text(self, kb: str, digest: str, limit: int) -> str | None:
        """The text kept for this original, its first `limit` bytes; None when none is
        kept or it does not match its digest (it is then converted again)."""
        found = read(self.home, self.folder_of(kb), digest, TEXT, limit)
        return None if found is None else found[0].decode("utf-8", "replace")

    def prune(
        self, kb: str, wanted: set[str], texts_before: float, failures_before: float
    ) -> tuple[int, set[str]]:
        """Forget the texts of originals no document has any more (`wanted`: those some
        have) written before `texts_before`, failures older than `failures_before` (the
        file that failed may still be there: it is tried once more), retries older than a
        day, and what a killed write left. Bytes freed, and the digests with a text kept.
        Nothing is removed through a link: folders are walked by handles."""
        freed, present = 0, set[str]()
        now = time.time()
        try:
            with (
                contextlib.suppress(FileNotFoundError),
                home_folder(self.home, self.folder_of(kb)) as root,
            ):
                freed, present = self._prune(root, wanted, texts_before, failures_before, now)
        except FolderRefused:  # a link: nothing is removed, nor converted again, through it
            return 0, set(wanted)
        return freed, present

    def _prune(
        self, root: int, wanted: set[str], texts_before: float, failures_before: float, now: float
    ) -> tuple[int, set[str]]:
        freed, present = 0, set[str]()
        for shard_name in os.listdir(root):
            try:
                shard = os.open(shard_name, dir_handles.FOLDER_FLAGS, dir_fd=root)
            except OSError:
                continue  # not a folder (or a link): nothing of ours below it
            try:
                for name in os.listdir(shard):
                    try:
                        found = os.stat(name, dir_fd=shard, follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    if self._stale(name, found, wanted, texts_before, failures_before, now):
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(name, dir_fd=shard)
                            freed += found.st_size
                    elif name.endswith(TEXT) and stat.S_ISREG(found.st_mode):
                        present.add(name.partition(".")[0])
            finally:
                os.close(shard)
        return freed, present

    @staticmethod
    def _stale(
        name: str,
        found: os.stat_result,
        wanted: set[str],
        texts_before: float,
        failures_before: float,
        now: float,
    ) -> bool:
        digest, _, kind = name.partition(".")
        kind = "." + kind
        if not digest:  # `.<name>.tmp`, a write's
            return found.st_mtime < now - STRAY_S
        if not _DIGEST.fullmatch(digest):
            return False
        if kind in (TEXT, TEXT_SUM):
            return digest not in wanted and found.st_mtime < texts_before
        if kind == FAILED:
            return digest not in wanted and found.st_mtime < failures_before
        return kind == RETRY and found.st_mtime < now - RETRY_AFTER_S

    def remove_kb(self, kb: str) -> None:
        """Every text of the KB, gone; through no link (a link there goes, not what it
        leads to)."""
        with contextlib.suppress(OSError):
            remove_home_folder(self.home, self.folder_of(kb))
