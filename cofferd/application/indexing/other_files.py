"""The files of each knowledge base that are not documents (images, canvases, PDFs a KB
does not index): what links lead to besides documents (`coffer_kernel.link_targets`).

They come from the Reindexer's scans, under the same confinement, ignore files and hidden
names as documents, never through a link: a full scan replaces a KB's whole set, a sync of
paths (the watcher's) the part under those paths. Memory is bounded: at most
`OTHER_FILES_LISTED` paths a KB (a scan counts those beyond, and `left_out` says so), held
as one frozenset replaced on each change (readers take it whole, on any thread), with a
count of changes that tells a reader its copy is old.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cofferd.domain.file_records import OTHER_FILES_LISTED


@dataclass(frozen=True)
class HeldFiles:
    paths: frozenset[str] = frozenset()
    changes: int = 0  # counts the changes of `paths` since the daemon started
    left_out: int = 0  # files beyond the bound, not held (links to them are not followed)


class OtherFiles:
    """Each KB's other files, as last scanned."""

    def __init__(self, limit: int = OTHER_FILES_LISTED) -> None:
        self.limit = limit
        self._held: dict[str, HeldFiles] = {}

    def of(self, kb: str) -> HeldFiles:
        return self._held.get(kb, HeldFiles())

    def replace(self, kb: str, paths: Iterable[str], left_out: int) -> None:
        """What a full scan found."""
        self._set(kb, frozenset(paths), left_out)

    def update(self, kb: str, under: Iterable[str], found: Iterable[str]) -> None:
        """What a scan of the paths `under` (files or folders, present or gone) found."""
        held = self.of(kb)
        roots = tuple(under)
        prefixes = tuple(root + "/" for root in roots)
        kept = {p for p in held.paths if p not in roots and not p.startswith(prefixes)}
        left_out = held.left_out
        for path in found:
            if len(kept) < self.limit:
                kept.add(path)
            else:
                left_out += 1
        self._set(kb, frozenset(kept), left_out)

    def forget(self, kb: str) -> None:
        self._held.pop(kb, None)

    def _set(self, kb: str, paths: frozenset[str], left_out: int) -> None:
        held = self.of(kb)
        if paths != held.paths or left_out != held.left_out:
            self._held[kb] = HeldFiles(paths, held.changes + 1, left_out)
