"""The TrashBin port on disk: an entry of the data home's trash (`Locations.trash_entry`)
holds a deleted document's Markdown file, its kept original and a manifest saying what they
were and where they came from.

Files are moved, never copied and left: a rename within one filesystem, else a durable copy
and then the removal of the source. Nothing is ever moved over an existing file.
"""

from __future__ import annotations

import json
import logging
import os
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from coffer_kernel.locations import Locations, TrashEntryFiles, check_relpath
from cofferd.domain.errors import CofferError, PathOccupied, StorageError
from cofferd.domain.file_records import TrashEntry
from cofferd.infrastructure.files import dir_handles, durable
from cofferd.infrastructure.files.confinement import (
    Boundary,
    ControlFileRefused,
    home_folder,
    home_folder_problem,
    read_control_file,
    remove_home_folder,
)

log = logging.getLogger(__name__)

TRASH_ID = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")
COPY_BLOCK = 1024 * 1024

REQUIRED = ("id", "document_id", "relative_path", "title", "deleted_at")  # older ones lack the rest


class FileTrash:
    def __init__(self, locations: Locations, boundary: Boundary) -> None:
        self.locations = locations
        self.boundary = boundary

    def put(self, kb: str, entry: TrashEntry, original: Path | None) -> None:
        """Move the document's files into a new entry; on failure, back where they were. The
        document is taken from its folder by handles (dir_handles): no folder swapped for
        a link meanwhile can make it another file."""
        files = self.locations.trash_entry(kb, entry.id)
        folder, name = dir_handles.on_disk(self.boundary, kb, entry.relative_path)
        shown = Path(self.boundary.shown(kb, self.boundary.root(kb) / folder / name))
        self._checked(kb)
        with home_folder(self.locations.home, files.folder.parent, make=True) as trash:
            os.mkdir(files.folder.name, 0o700, dir_fd=trash)  # a new entry, through no link
        moved = {files.document: shown}  # as people know it
        if original is not None:
            moved[files.original(original.name)] = original
        try:
            # the manifest first: an entry interrupted half way still says what it holds
            manifest = _manifest(entry, files, moved)
            with (
                dir_handles.kb_folder(self.boundary, kb, folder, make=False) as source,
                home_folder(self.locations.home, files.folder) as kept,
            ):
                durable.replace(kept, files.manifest.name, manifest, 0o600)
                dir_handles.move(source, name, kept, files.document.name)
        except OSError as exc:
            self._remove(files.folder)
            raise _refused(f"cannot move {shown} to the trash", exc) from exc
        except CofferError:  # refused: a link where a folder was
            self._remove(files.folder)
            raise
        if original is None:
            return
        try:
            files.originals.mkdir(mode=0o700)
            move_file(original, files.original(original.name))
        except OSError as exc:
            self._document_to_folder(kb, folder, name, files)
            self._remove(files.folder)
            raise _refused(f"cannot move {original} to the trash", exc) from exc

    def _document_to_folder(self, kb: str, folder: str, name: str, files: TrashEntryFiles) -> None:
        """The document moved back from the entry to its folder (by handles, made again)."""
        with (
            home_folder(self.locations.home, files.folder) as kept,
            dir_handles.kb_folder(self.boundary, kb, folder, make=True) as target,
        ):
            dir_handles.move(kept, files.document.name, target, name)

    def entries(self, kb: str) -> list[TrashEntry]:
        """Every readable entry, newest first."""
        try:
            root = self._checked(kb)
        except StorageError as exc:
            log.warning("%s", exc.message)
            return []
        found = []
        for folder in root.iterdir() if root.is_dir() else ():
            entry = self.get(kb, folder.name)
            if entry is not None:
                found.append(entry)
        return sorted(found, key=lambda e: (e.deleted_at, e.id), reverse=True)

    def page(self, kb: str, limit: int, offset: int) -> tuple[list[TrashEntry], int]:
        """A page of the entries, newest first by their ids (ULIDs, in the order they were
        made), and how many there are: only the page's manifests are read (an unreadable
        one is left out of its page)."""
        try:
            root = self._checked(kb)
        except StorageError as exc:
            log.warning("%s", exc.message)
            return [], 0
        names = sorted(
            (f.name for f in root.iterdir() if TRASH_ID.match(f.name)) if root.is_dir() else (),
            reverse=True,
        )
        found = [self.get(kb, name) for name in names[offset : offset + limit]]
        return [entry for entry in found if entry is not None], len(names)

    def get(self, kb: str, trash_id: str) -> TrashEntry | None:
        if not TRASH_ID.match(trash_id):
            return None
        path = self.locations.trash_entry(kb, trash_id).manifest
        try:
            found = read_control_file(path)
            if found is None:
                return None
            data = json.loads(found.data)
            fields = TrashEntry.__dataclass_fields__
            entry = TrashEntry(**{k: data[k] if k in REQUIRED else data.get(k) for k in fields})
            _check_types(entry)
            if entry.id != trash_id:
                raise ValueError(f"it names another entry ({entry.id!r})")
            return entry
        except (OSError, ValueError, TypeError, KeyError, ControlFileRefused) as exc:
            log.warning("trash entry %s cannot be read (%s); left as it is", path.parent, exc)
            return None

    def restore(self, kb: str, entry: TrashEntry) -> None:
        """Move the files back where they were (their folders made again, by handles);
        PathOccupied when a file sits there."""
        files = self.locations.trash_entry(kb, entry.id)
        self._checked(kb)
        folder, name = dir_handles.on_disk(self.boundary, kb, entry.relative_path)
        shown = self.boundary.shown(kb, self.boundary.root(kb) / folder / name)
        original_target = (
            self.boundary.raw_folder(kb) / check_relpath(entry.original) if entry.original else None
        )
        if original_target is not None and os.path.lexists(original_target):
            raise _occupied(original_target)
        try:
            self._document_to_folder(kb, folder, name, files)
        except FileExistsError:
            raise _occupied(Path(shown)) from None
        except OSError as exc:
            raise _refused(f"cannot move the document back to {shown}", exc) from exc
        if entry.original and original_target is not None:
            kept = files.original(entry.original)
            try:
                move_file(kept, original_target)
            except FileNotFoundError:
                log.warning("trash entry %s lost its original %s", files.folder, kept)
            except OSError as exc:
                self._document_to_entry(kb, folder, name, files)  # all or nothing
                if isinstance(exc, FileExistsError):
                    raise _occupied(original_target) from None
                raise _refused(f"cannot move the original back to {original_target}", exc) from exc
        remove_home_folder(self.locations.home, files.folder)

    def _document_to_entry(self, kb: str, folder: str, name: str, files: TrashEntryFiles) -> None:
        """The document moved from its folder back into the entry (a restore undone)."""
        with (
            dir_handles.kb_folder(self.boundary, kb, folder, make=False) as source,
            home_folder(self.locations.home, files.folder) as kept,
        ):
            dir_handles.move(source, name, kept, files.document.name)

    def purge(self, kb: str, trash_id: str) -> None:
        if TRASH_ID.match(trash_id):
            self._checked(kb)
            remove_home_folder(self.locations.home, self.locations.trash_entry(kb, trash_id).folder)

    def _checked(self, kb: str) -> Path:
        """The KB's trash folder, checked now to be reached from the data home through no
        link (StorageError: it is not used, and status says why)."""
        root = self.locations.trash_dir(kb)
        problem = home_folder_problem(self.locations.home, root)
        if problem is not None:
            raise StorageError(f"the trash is not used: {problem}", path=str(root))
        return root

    def _remove(self, folder: Path) -> None:
        """An entry's folder, removed through no link (a failure is logged)."""
        try:
            remove_home_folder(self.locations.home, folder)
        except OSError as exc:
            log.warning("trash entry %s is not removed: %s", folder, exc)


def move_file(src: Path, dst: Path) -> None:
    """Move a file between two folders of the data home (dir_handles.move)."""
    with dir_handles.opened(src.parent) as source, dir_handles.opened(dst.parent) as target:
        dir_handles.move(source, src.name, target, dst.name)


def _check_types(entry: TrashEntry) -> None:
    """A manifest edited by hand (or damaged) that does not hold what Coffer writes."""
    for name, value in entry.__dict__.items():
        optional = name in ("original", "source_path", "content_sha256")
        if not isinstance(value, str) and not (optional and value is None):
            raise TypeError(f"{name} is not text")
    if datetime.fromisoformat(entry.deleted_at).tzinfo is None:
        raise ValueError("deleted_at has no time zone")
    check_relpath(entry.relative_path)
    if entry.original is not None:
        check_relpath(entry.original)


def _manifest(entry: TrashEntry, files: TrashEntryFiles, moved: dict[Path, Path]) -> bytes:
    """The entry, and each file it holds (by its path in the entry) with where it was."""
    inside = {kept.relative_to(files.folder).as_posix(): str(was) for kept, was in moved.items()}
    data: dict[str, Any] = {**entry.__dict__, "moved": inside}
    return json.dumps(data, indent=1).encode()  # ASCII: a name that is not UTF-8 survives


def _occupied(path: Path) -> PathOccupied:
    return PathOccupied(
        f"a file is at {path}; move it away to restore the document there", path=str(path)
    )


def _refused(what: str, exc: OSError) -> StorageError:
    return StorageError(f"{what}: {exc.strerror or exc}", errno=exc.errno)
