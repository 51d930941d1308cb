"""Reading a knowledge base's docs/ tree: which files are Markdown, and reading them whole."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import stat as stat_mod
import unicodedata
from pathlib import Path

from cofferd.domain.errors import StorageError
from cofferd.domain.ports import FileContent, FileStat, TreeScan
from cofferd.infrastructure.fsutil import atomic_write
from cofferd.infrastructure.paths import Locations, normalize_relpath

log = logging.getLogger(__name__)

MARKDOWN_SUFFIXES = (".md", ".markdown")
READ_ATTEMPTS = 5

# Editor and sync-tool droppings: vim swap/backup and its `4913` probe, emacs locks and
# autosaves, LibreOffice/Office locks, Syncthing and browser partial files, *.tmp.
_NOISE = re.compile(
    r"""^(?:
        \..*                        # hidden: .swp, .#lock, .syncthing.*.tmp, .DS_Store
      | .*~                         # backups
      | 4913
      | \#.*\#                      # emacs autosave
      | ~\$.*                       # Office owner files
      | .*\.(?:tmp|temp|swp|swo|swx|part|crdownload|bak)
    )$""",
    re.VERBOSE | re.IGNORECASE,
)


def is_noise(name: str) -> bool:
    return bool(_NOISE.match(name))


def is_markdown(name: str) -> bool:
    return name.lower().endswith(MARKDOWN_SUFFIXES) and not is_noise(name)


def _stat(st: os.stat_result) -> FileStat:
    return FileStat(size=st.st_size, mtime_ns=st.st_mtime_ns)


class FileDocsTree:
    """The DocsTree port over the real filesystem."""

    def __init__(self, locations: Locations) -> None:
        self.locations = locations
        self._folders: dict[str, bool] = {}  # folder -> inside its docs tree (reset per scan)

    def scan(self, kb: str, under: str = "") -> TreeScan:
        """Every Markdown file in the docs tree, or in its folder `under` (relative).

        A folder that cannot be listed is reported in `failed_dirs`, never taken as empty.
        """
        self._folders.clear()
        root = self.locations.docs_dir(kb)
        try:
            real_root = root.resolve(strict=True)
            start = self._disk_path(kb, under) if under else real_root
            if not start.is_dir():
                start.stat()  # raises FileNotFoundError when gone
                return TreeScan(files={}, failed_dirs=[])
        except OSError as exc:
            if under:
                gone = isinstance(exc, FileNotFoundError | NotADirectoryError)
                return TreeScan(files={}, failed_dirs=[] if gone else [under])
            raise StorageError(
                f"cannot read the docs folder {root}: {exc}", path=str(root)
            ) from exc
        if not _inside(os.path.realpath(start), real_root):
            return TreeScan(files={}, failed_dirs=[])
        files: dict[str, FileStat] = {}
        failed: list[str] = []
        stack: list[tuple[str, str]] = [(under + "/" if under else "", str(start))]
        while stack:
            prefix, folder = stack.pop()
            try:
                with os.scandir(folder) as entries:
                    for entry in entries:
                        self._visit(entry, prefix, real_root, files, stack)
            except OSError as exc:
                if not prefix and not under:
                    raise StorageError(
                        f"cannot read the docs folder {root}: {exc}", path=str(root)
                    ) from exc
                log.warning("cannot list %s: %s", folder, exc)
                failed.append(prefix.rstrip("/"))
        return TreeScan(files=files, failed_dirs=failed)

    def _visit(
        self,
        entry: os.DirEntry[str],
        prefix: str,
        real_root: Path,
        files: dict[str, FileStat],
        stack: list[tuple[str, str]],
    ) -> None:
        name = entry.name
        if is_noise(name):
            return
        relpath = normalize_relpath(prefix + name)
        try:
            # A linked folder is never followed: inside the tree its files are indexed at
            # their real path; outside it, they are not part of this KB.
            if entry.is_symlink() and (
                entry.is_dir() or not _inside(os.path.realpath(entry.path), real_root)
            ):
                return
            if entry.is_dir():
                stack.append((relpath + "/", entry.path))
            elif is_markdown(name) and entry.is_file():
                files[relpath] = _stat(entry.stat())
        except OSError as exc:  # vanished or unreadable between listing and stat
            log.debug("skipping %s: %s", entry.path, exc)

    def _disk_path(self, kb: str, relpath: str) -> Path:
        """Where a document really is. Index keys are NFC; a name synced from macOS may be
        stored decomposed (NFD), which Linux treats as a different name."""
        path = self.locations.doc_path(kb, relpath)
        if not os.path.lexists(path):
            decomposed = self.locations.doc_path(kb, unicodedata.normalize("NFD", relpath))
            if decomposed != path and os.path.lexists(decomposed):
                return decomposed
        return path

    def stat(self, kb: str, relpath: str) -> FileStat | None:
        """The file's size and mtime if it is a Markdown file Coffer indexes, else None."""
        if not is_markdown(relpath.rsplit("/", 1)[-1]) or any(
            is_noise(part) for part in relpath.split("/")
        ):
            return None
        path = self._disk_path(kb, relpath)
        try:
            if not self._inside_docs(kb, path):
                return None
            st = path.stat()
        except OSError:
            return None
        return _stat(st) if stat_mod.S_ISREG(st.st_mode) else None

    def read(self, kb: str, relpath: str) -> FileContent | None:
        """The file's bytes, read again while it changes under us (a save in progress)."""
        path = self._disk_path(kb, relpath)
        if not self._folder_inside_docs(kb, path.parent):
            return None
        content: FileContent | None = None
        for _ in range(READ_ATTEMPTS):
            try:
                content = self._read_once(kb, path)
            except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
                return None
            if content is None or content.stat.size == len(content.data):
                return content
        return content

    def _read_once(self, kb: str, path: Path) -> FileContent | None:
        """One read of the file (its target checked first if it is a symlink)."""
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            if exc.errno != errno.ELOOP:  # ELOOP: the file is a symlink; check its target
                raise
            if not self._inside_docs(kb, path):
                return None
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            before = _stat(os.fstat(fd))
            data = fh.read()
            after = _stat(os.fstat(fd))
        # A write during the read shows as a changed stat: report a size that cannot match.
        return FileContent(data=data, stat=before if after == before else FileStat(-1, 0))

    def _folder_inside_docs(self, kb: str, folder: Path) -> bool:
        key = str(folder)
        inside = self._folders.get(key)
        if inside is None:
            inside = self._folders[key] = self._inside_docs(kb, folder)
        return inside

    def absolute(self, kb: str, relpath: str) -> str:
        return str(self._disk_path(kb, relpath))

    def write(self, kb: str, relpath: str, data: bytes) -> None:
        path = self._disk_path(kb, relpath)
        if path.is_symlink():  # write where the link points, and keep the link
            if not self._inside_docs(kb, path):
                raise StorageError(f"{relpath} links outside the docs folder", path=relpath)
            path = Path(os.path.realpath(path))
        atomic_write(path, data)

    def remove(self, kb: str, relpath: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._disk_path(kb, relpath).unlink()

    def remove_originals(self, kb: str, doc_id: str) -> None:
        raw = self.locations.raw_dir(kb)
        for original in raw.glob(f"{doc_id}.*") if raw.is_dir() else ():
            with contextlib.suppress(FileNotFoundError):
                original.unlink()

    def keep_original(self, kb: str, doc_id: str, ext: str, source: Path) -> None:
        """Store the original as raw/<id>.<ext>, replacing any earlier one of the document."""
        target = self.locations.raw_path(kb, doc_id, ext)
        if target.exists() and target.samefile(source):
            return  # reconverting from the kept original itself
        atomic_write(target, source.read_bytes(), mode=0o600)
        for older in self.locations.raw_dir(kb).glob(f"{doc_id}.*"):
            if older != target:
                older.unlink(missing_ok=True)

    def original(self, kb: str, doc_id: str) -> Path | None:
        raw = self.locations.raw_dir(kb)
        found = sorted(raw.glob(f"{doc_id}.*")) if raw.is_dir() else []
        return found[0] if found else None

    def _inside_docs(self, kb: str, path: Path) -> bool:
        return _inside(os.path.realpath(path), self.locations.docs_dir(kb).resolve())


def _inside(target: str, root: Path) -> bool:
    return target == str(root) or target.startswith(str(root) + os.sep)
