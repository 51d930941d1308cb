"""A knowledge base's docs/ tree on disk: scanning it for documents (as the DocumentPolicy
defines them), reading and writing them whole, and the originals kept in raw/."""

from __future__ import annotations

import contextlib
import logging
import os
import stat as stat_mod
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from coffer_kernel.locations import Locations, normalize_relpath
from cofferd.domain.conflicts import ConflictCopy, conflict_copy
from cofferd.domain.errors import KBUnavailable, PathRefused, StorageError, ValidationFailed
from cofferd.domain.file_names import numbered, same_name
from cofferd.domain.file_records import OTHER_FILES_LISTED, FileContent, FileStat, TreeScan
from cofferd.infrastructure.files import dir_handles, durable
from cofferd.infrastructure.files.confined_read import TreeReader, disk_path, stat_of
from cofferd.infrastructure.files.confinement import write_home_file
from cofferd.infrastructure.files.document_policy import DocumentPolicy, FolderNames, Kind
from cofferd.infrastructure.files.ignore_rules import IGNORE_FILES, IgnoreRules

log = logging.getLogger(__name__)

NAMES_TRIED = 10_000  # `Plan 2.md` ... before a folder is taken for full
PRIVATE = 0o600  # a document Coffer writes in the data home
_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass
class _Found:
    files: dict[str, tuple[int, int]] = field(default_factory=dict)  # (size, mtime_ns)
    failed: list[str] = field(default_factory=list)
    unusable: dict[str, str] = field(default_factory=dict)  # path -> why it is skipped
    conflicts: dict[str, ConflictCopy] = field(default_factory=dict)
    others: list[str] = field(default_factory=list)  # files that are not documents
    others_left_out: int = 0


class FileDocsTree:
    """The DocsTree port over the real filesystem."""

    def __init__(self, locations: Locations, policy: DocumentPolicy) -> None:
        self.locations = locations
        self.policy = policy
        self.boundary = policy.boundary

    def scan(self, kb: str, under: str = "") -> TreeScan:
        """Every Markdown file in the docs tree, or in its folder `under` (relative), and
        the other files beside them (`under` may be one of those).

        A folder that cannot be listed, or whose ignore files cannot be read, is reported
        in `failed_dirs`, never taken as empty. A full scan reads the ignore files afresh.
        """
        real_root = self.boundary.root(kb)
        rules = self.policy.fresh_ignore_rules(kb) if not under else self.policy.ignore_rules(kb)
        try:
            start = disk_path(real_root, under) if under else real_root
            if under and (
                start.is_symlink() or self.policy.classify(kb, under, True) is not Kind.FOLDER
            ):
                return TreeScan(files={}, failed_dirs=[])  # a linked, noise or ignored folder
            if not start.is_dir():
                start.stat()  # raises FileNotFoundError when gone
                other = start.is_file() and self.policy.classify(kb, under) is Kind.FILE
                return TreeScan(files={}, failed_dirs=[], other_files=[under] if other else [])
        except OSError as exc:
            if under:
                gone = isinstance(exc, FileNotFoundError | NotADirectoryError)
                return TreeScan(files={}, failed_dirs=[] if gone else [under])
            raise self._unreadable(kb, exc) from exc
        if under and not self.boundary.holds(kb, start):
            return TreeScan(files={}, failed_dirs=[])
        found = _Found()
        stack: list[tuple[str, str]] = [(under + "/" if under else "", str(start))]
        while stack:
            prefix, folder = stack.pop()
            try:
                self._list(kb, rules, folder, prefix, found, stack)
            except OSError as exc:
                if not prefix and not under:
                    raise self._unreadable(kb, exc) from exc
                log.warning("cannot list %s: %s", folder, exc)
                found.failed.append(prefix.rstrip("/"))
        return TreeScan(
            files=found.files,
            failed_dirs=found.failed,
            unusable={**rules.problems, **found.unusable},
            conflicts=found.conflicts,
            other_files=found.others,
            other_files_left_out=found.others_left_out,
        )

    def _unreadable(self, kb: str, exc: OSError) -> StorageError:
        """Why the docs folder cannot be listed: KBUnavailable when it went away meanwhile
        (raised from here), else a StorageError to raise."""
        self.boundary.root(kb)
        folder = self.locations.docs_folder(kb)
        return StorageError(
            f"cannot read the docs folder {folder}: {exc.strerror or exc}", path=str(folder)
        )

    def _list(
        self,
        kb: str,
        rules: IgnoreRules,
        folder: str,
        prefix: str,
        found: _Found,
        stack: list[tuple[str, str]],
    ) -> None:
        """One folder's documents into `found`, its folders onto `stack`. The folder is
        opened without following a link (one swapped in since it was listed is refused),
        and its files are looked at in that very folder, never through a link either. Its
        ignore files are read only when the listing shows one."""
        relfolder = prefix.rstrip("/")
        files = found.files
        fd = os.open(folder, _FOLDER_FLAGS)
        try:
            with os.scandir(fd) as listing:
                entries = list(listing)
            if not any(entry.name in IGNORE_FILES for entry in entries):
                rules.none_in(relfolder)
            if rules.unreadable(relfolder):
                found.failed.append(relfolder)
                return
            names = self.policy.in_folder(kb, relfolder)
            if names is None:
                return  # nothing in it is indexed (a folder is stacked only when it is)
            classify = names.classify
            for entry in entries:  # a tight loop: it runs for every file of the tree
                name = entry.name
                if name.isascii():  # the common case, and already NFC
                    relpath = prefix + name
                else:
                    named = self._unicode(entry, prefix, found, names)
                    if named is None:
                        continue
                    relpath, name = named
                try:
                    if entry.is_symlink():
                        continue  # never a document, never followed: indexed where it is
                    kind = classify(relpath, name, entry.is_dir())
                    if kind is Kind.DOCUMENT and entry.is_file():
                        st = entry.stat(follow_symlinks=False)
                        files[relpath] = (st.st_size, st.st_mtime_ns)
                    elif kind is Kind.FOLDER:
                        stack.append((relpath + "/", f"{folder}{os.sep}{entry.name}"))
                    elif kind is Kind.FILE and entry.is_file():
                        if len(found.others) < OTHER_FILES_LISTED:
                            found.others.append(relpath)
                        else:
                            found.others_left_out += 1
                    elif kind is Kind.CONFLICT_COPY and entry.is_file():
                        copy = conflict_copy(relpath)
                        if copy is not None:
                            found.conflicts[relpath] = copy
                except OSError as exc:  # vanished or unreadable between listing and stat
                    log.debug("skipping %s%s%s: %s", folder, os.sep, entry.name, exc)
        finally:
            os.close(fd)

    def _unicode(
        self, entry: os.DirEntry[str], prefix: str, found: _Found, names: FolderNames
    ) -> tuple[str, str] | None:
        """(relative path, name) of an entry whose name is not ASCII, NFC; None for a name
        that is not UTF-8 (reported in `found` when it could be a document or a folder)."""
        name = entry.name
        if not _utf8(name):  # undecodable bytes arrive as surrogates: no key can hold it
            shown = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            if not self.policy.is_noise(shown) and (
                entry.is_dir(follow_symlinks=False) or names.has_document_suffix(shown)
            ):
                found.unusable[prefix + shown] = "the name is not valid UTF-8: rename it"
            return None
        relpath = normalize_relpath(prefix + name)
        return relpath, relpath.rpartition("/")[2]

    def stat(self, kb: str, relpath: str) -> FileStat | None:
        """The file's size and mtime if it is a document, else None."""
        if not self.policy.is_document(kb, relpath):
            return None
        try:
            st = self.boundary.place(kb, relpath).lstat()
        except (OSError, PathRefused):
            return None
        return stat_of(st) if stat_mod.S_ISREG(st.st_mode) else None

    def read(self, kb: str, relpath: str, sink: BinaryIO | None = None) -> FileContent | None:
        """The file's bytes, read again while it changes under us (a save in progress).
        None when it is not there; KBUnavailable when its folder is not (not even since
        the read began: a disk unplugged takes every file with it). With a `sink`, the
        bytes are copied there, not kept (the content's data is empty)."""
        content = TreeReader(self.boundary.root(kb)).read(relpath, 0 if sink else None, sink)
        if content is None:
            self.boundary.root(kb)
        return content

    def within(self, kb: str, path: Path) -> str | None:
        try:
            root = self.boundary.root(kb)
        except KBUnavailable:
            return None
        real = Path(os.path.realpath(path))
        if not real.is_relative_to(root):
            return None
        return normalize_relpath(real.relative_to(root).as_posix())

    def absolute(self, kb: str, relpath: str) -> str:
        """The file's path as people know it (in an attached folder, not through the link)."""
        return self.places(kb, [relpath])[relpath]

    def places(self, kb: str, relpaths: Iterable[str]) -> dict[str, str]:
        """`absolute` of many files of one KB at once: one look at where its folder is; a
        file's own name is looked up on disk only when it could be stored decomposed."""
        docs = self.locations.docs_dir(kb)
        folder = str(self.locations.docs_folder(kb))
        found = {}
        for relpath in relpaths:
            if not relpath.isascii() and not unicodedata.is_normalized("NFD", relpath):
                relpath_on_disk = disk_path(docs, relpath).relative_to(docs).as_posix()
            else:
                relpath_on_disk = relpath
            found[relpath] = f"{folder}{os.sep}{relpath_on_disk}"
        return found

    def write(self, kb: str, relpath: str, data: bytes) -> None:
        """Replace the file with `data`, keeping its permissions (a new one gets those of
        `_new_file_mode`); written through handles on its folders (dir_handles)."""
        folder, name = dir_handles.on_disk(self.boundary, kb, relpath)
        with dir_handles.kb_folder(self.boundary, kb, folder, make=True) as fd:
            mode = dir_handles.file_mode(fd, name)
            durable.replace(fd, name, data, self._new_file_mode(kb, fd) if mode is None else mode)

    def create(self, kb: str, folder: str, stem: str, data: bytes) -> str:
        """Write a new document in `folder` (relative; "" the top), named `stem.md`, or
        `stem 2.md`, ... : the first name that no file of that folder has in any case or
        Unicode form (the same file on macOS and Windows). Its missing folders are made.
        Answers its path; never replaces a file."""
        self._check_open(kb, folder)
        with dir_handles.kb_folder(self.boundary, kb, folder, make=True) as fd:
            taken = {same_name(name) for name in os.listdir(fd)}
            mode = self._new_file_mode(kb, fd)
            for n in range(1, NAMES_TRIED + 1):
                name = numbered(stem, n)
                relpath = self._relpath(folder, name)
                if same_name(name) in taken or not self._indexed_as_document(kb, relpath):
                    continue
                try:
                    durable.create(fd, name, data, mode)
                except FileExistsError:  # made meanwhile, by an editor or a sync
                    taken.add(same_name(name))
                    continue
                return relpath
        raise StorageError(f"no free name for {stem!r} in {folder or 'the top folder'}")

    def _check_open(self, kb: str, folder: str) -> None:
        """A document in `folder` would be indexed: no part of it is hidden, noise or
        ignored (ValidationFailed otherwise)."""
        self.boundary.root(kb)  # the ignore rules are read from the root checked now
        if folder and self.policy.classify(kb, folder, True) is not Kind.FOLDER:
            raise ValidationFailed(
                f"{folder} is a hidden folder, or one an ignore file excludes: a document "
                "added there would not be indexed",
                field="folder",
            )

    def _indexed_as_document(self, kb: str, relpath: str) -> bool:
        """Whether a new file at `relpath` would be a document; False for a name a sync
        tool gives its conflict copies (another name will do); ValidationFailed when an
        ignore file excludes it (no name would do)."""
        kind = self.policy.classify(kb, relpath)
        if kind is Kind.OTHER:
            raise ValidationFailed(
                f"{relpath} would not be indexed: an ignore file of the knowledge base excludes it"
            )
        return kind is Kind.DOCUMENT

    @staticmethod
    def _relpath(folder: str, name: str) -> str:
        return f"{folder}/{name}" if folder else name

    def _new_file_mode(self, kb: str, folder: int) -> int:
        """A new document in the data home is private; one in a folder of the user's gets
        what a file they made there would: that folder's permissions without execute."""
        if self.locations.attached_folder(kb) is None:
            return PRIVATE
        return dir_handles.folder_mode(folder)

    def remove(self, kb: str, relpath: str) -> None:
        folder, name = dir_handles.on_disk(self.boundary, kb, relpath)
        with (
            contextlib.suppress(FileNotFoundError),
            dir_handles.kb_folder(self.boundary, kb, folder, make=False) as fd,
        ):
            dir_handles.unlink(fd, name)

    def remove_originals(self, kb: str, doc_id: str) -> None:
        for original in self._originals(kb, doc_id):
            with contextlib.suppress(FileNotFoundError):
                original.unlink()

    def keep_original(self, kb: str, doc_id: str, ext: str, source: Path) -> None:
        """Store the original as raw/<id>.<ext>, replacing any earlier one of the document."""
        target = self.locations.raw_path(kb, doc_id, ext)
        try:
            self.boundary.raw_folder(kb)
            if target.exists() and target.samefile(source):
                return  # reconverting from the kept original itself
            write_home_file(self.locations.home, target, source.read_bytes())
            for older in self._originals(kb, doc_id):
                if older != target:
                    older.unlink(missing_ok=True)
        except OSError as exc:
            raise StorageError(
                f"cannot keep the original in {target.parent}: {exc.strerror or exc}"
            ) from exc

    def original(self, kb: str, doc_id: str) -> Path | None:
        found = sorted(self._originals(kb, doc_id))
        return found[0] if found else None

    def _originals(self, kb: str, doc_id: str) -> list[Path]:
        """The document's kept originals: regular files in a raw/ that is a folder."""
        try:
            raw = self.boundary.raw_folder(kb)
        except (OSError, StorageError):
            return []
        return [p for p in raw.glob(f"{doc_id}.*") if p.is_file() and not p.is_symlink()]


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
