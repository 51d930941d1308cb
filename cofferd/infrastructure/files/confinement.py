"""The boundary of every knowledge base's files, checked where they are used.

A KB's root is where its documents really are: its own folder `knowledge/<kb>/docs/`, or a
folder of the user's that this machine attached (docs/ is then a link to it). Before every
reconcile, read, write and move, the root is resolved again and checked:

* the KB's folder in `knowledge/` is a folder, not a link (what it holds is written there);
* a docs/ that is a link is followed only when this machine attached it: the attachment,
  kept in the data home's local settings, records the folder's identity (device and
  inode), and the folder the link leads to now must be that one. A link that arrived by a
  sync or a copy, or one pointed elsewhere since, makes the KB unavailable until the user
  attaches the folder again (`cofferctl kb attach`);
* an attached root never overlaps the data home or another KB's root.

Below the root, a path is used only when none of its folders is a link (`place`), and files
are opened without following one (doc_files, `read_control_file`).

Control files (settings, ignore files) are read by `read_control_file`: regular files
only, opened without blocking (a FIFO would never answer), and bounded in size.

The folders Coffer owns in the data home (derived/, incoming/, trash/, local/, models/ and
their folders per KB) are inside the boundary too: each is opened from the data home one
name at a time without following a link (`home_folder`), files there are opened without
following a link or blocking (`open_home_file`), a folder is removed from a handle on its
parent (`remove_home_folder`), and `home_problems` says, for `status`, which of them is a
link and so refused.

Long on purpose: every check of where a file may be read, written or removed is here, in
one module (principle 10), so that a rule about links is never kept in two places.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import secrets
import shutil
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from coffer_kernel.locations import Locations, check_relpath
from cofferd.domain.errors import KBUnavailable, PathRefused, StorageError
from cofferd.infrastructure.files import durable
from cofferd.infrastructure.files.confined_read import disk_path, inside
from cofferd.infrastructure.files.durable import make_folder

log = logging.getLogger(__name__)

CONTROL_FILE_MAX = 1024 * 1024  # settings or ignore rules larger than this are not written by hand


class ControlFileRefused(ValueError):
    """A control file that is not a regular file: a link, a folder, a FIFO or a device."""


@dataclass(frozen=True)
class ControlFile:
    data: bytes  # at most the limit
    cut: bool  # the file holds more than the limit


def read_control_file(
    path: Path, limit: int = CONTROL_FILE_MAX, *, home: Path | None = None
) -> ControlFile | None:
    """The file's first `limit` bytes, or None when there is no file. ControlFileRefused
    when it is not a regular file; OSError when it cannot be read. With `home`, the file is
    one of the data home's own (local/), read as read_home_file reads it."""
    if home is not None:
        return read_home_file(home, path, limit)
    try:
        before = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if not stat.S_ISREG(before.st_mode):
        raise ControlFileRefused(f"{path.name} is {_kind(before.st_mode)}, not a regular file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # swapped for a link since the look above
            raise ControlFileRefused(f"{path.name} is a link, not a regular file") from None
        raise
    with os.fdopen(fd, "rb") as fh:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode):
            raise ControlFileRefused(f"{path.name} is {_kind(now.st_mode)}, not a regular file")
        data = fh.read(limit + 1)
    return ControlFile(data[:limit], len(data) > limit)


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device"


@dataclass(frozen=True)
class Attachment:
    """A folder of the user's attached as a KB on this machine, by identity."""

    folder: str
    device: int
    inode: int

    @classmethod
    def of(cls, folder: Path) -> Attachment:
        st = os.stat(folder)
        return cls(str(folder), st.st_dev, st.st_ino)

    def matches(self, real: Path, st: os.stat_result) -> bool:
        """The same folder: same device and inode; or, at the very path attached, the same
        inode on a device numbered anew (a disk plugged in again)."""
        same_device = st.st_dev == self.device or str(real) == self.folder
        return same_device and st.st_ino == self.inode


class Boundary:
    """Every KB's root, resolved and checked at the moment of use."""

    def __init__(self, locations: Locations) -> None:
        self.locations = locations
        self._roots: dict[str, Path] = {}  # KB -> its root, as last checked
        self.refusals: dict[str, str] = {}  # KB -> why its folder is not used now

    # -- attachments (this machine's own settings) -------------------------------------

    def attachment(self, kb: str) -> Attachment | None:
        path = self.locations.attachment_path(kb)
        try:
            found = read_control_file(path, home=self.locations.home)
            data = json.loads(found.data) if found is not None else None
            return None if data is None else Attachment(**data)
        except (OSError, ControlFileRefused, ValueError, TypeError):
            return None  # unreadable: as good as not attached here

    def record(self, kb: str, folder: Path) -> None:
        """Remember that this machine attached `folder` (resolved) as the KB's docs."""
        found = Attachment.of(folder)
        data = json.dumps(found.__dict__).encode()
        write_home_file(self.locations.home, self.locations.attachment_path(kb), data)

    def forget(self, kb: str) -> None:
        remove_home_file(self.locations.home, self.locations.attachment_path(kb))
        self._roots.pop(kb, None)
        self.refusals.pop(kb, None)

    # -- roots ---------------------------------------------------------------------------

    def root(self, kb: str) -> Path:
        """The KB's root, checked now; KBUnavailable saying why when it may not be used."""
        try:
            real = self._resolve(kb)
        except KBUnavailable as exc:
            self._roots.pop(kb, None)
            self.refusals[kb] = exc.message
            raise
        self._roots[kb] = real
        self.refusals.pop(kb, None)
        return real

    def problem(self, kb: str) -> str | None:
        """Why the KB's folder may not be used now (checked now), or None."""
        try:
            self.root(kb)
        except KBUnavailable as exc:
            return exc.message
        return None

    def known_root(self, kb: str) -> Path | None:
        """The root as last checked, without looking again (None: refused or not yet)."""
        return self._roots.get(kb)

    def _resolve(self, kb: str) -> Path:
        knowledge = Path(os.path.realpath(self.locations.knowledge_root))
        kb_dir = knowledge / kb
        docs = kb_dir / "docs"
        try:
            if not stat.S_ISDIR(os.lstat(kb_dir).st_mode):
                raise KBUnavailable(kb, f"{kb_dir} is not a folder (a link is not followed)")
            mode = os.lstat(docs).st_mode
        except FileNotFoundError:
            raise KBUnavailable(
                kb, f"its docs folder {self.locations.docs_folder(kb)} is missing"
            ) from None
        except OSError as exc:
            raise KBUnavailable(kb, f"its folder cannot be read: {exc.strerror}") from None
        if stat.S_ISDIR(mode):
            return docs
        if not stat.S_ISLNK(mode):
            raise KBUnavailable(kb, f"{docs} is not a folder")
        return self._attached_root(kb, docs)

    def _attached_root(self, kb: str, docs: Path) -> Path:
        target = os.readlink(docs)
        again = f"if it is the folder you mean, attach it: cofferctl kb attach {kb} {target}"
        record = self.attachment(kb)
        if record is None:
            raise KBUnavailable(
                kb, f"its docs is a link to {target}, not attached on this machine; {again}"
            )
        real = Path(os.path.realpath(docs))
        try:
            st = os.stat(real)
        except OSError as exc:
            raise KBUnavailable(
                kb, f"its docs folder {target} is missing (a disk not mounted?): {exc.strerror}"
            ) from None
        if not record.matches(real, st):
            raise KBUnavailable(
                kb,
                f"the folder at {target} is not the one attached ({record.folder}): it was "
                f"replaced, moved or linked elsewhere; {again}",
            )
        home = os.path.realpath(self.locations.home)
        if _overlap(str(real), home):
            raise KBUnavailable(kb, f"its docs folder {target} leads into Coffer's data home")
        for other, theirs in self._roots.items():
            if other != kb and _overlap(str(real), str(theirs)):
                raise KBUnavailable(
                    kb, f"its docs folder {target} overlaps the folder of {other!r}"
                )
        return real

    # -- paths below a root ---------------------------------------------------------------

    def place(self, kb: str, relpath: str, *, make_folders: bool = False) -> Path:
        """Where a document of the KB is on disk, for a write, move or removal: below the
        root checked now, through no link (PathRefused). Its missing folders are made when
        asked."""
        root = self.root(kb)
        path = disk_path(root, check_relpath(relpath))
        if not _through_folders(root, path.parent, relpath, make=make_folders):
            return path  # a folder on the way is not there: nothing below it either
        with contextlib.suppress(FileNotFoundError):
            if not stat.S_ISREG(os.lstat(path).st_mode):
                raise PathRefused(f"{relpath} is a link or not a regular file", path=relpath)
        return path

    def folder(self, kb: str, relpath: str) -> Path:
        """A folder of the KB ("": its root) for a new file: below the root checked now,
        through no link (PathRefused), made with its missing parents."""
        root = self.root(kb)
        path = disk_path(root, check_relpath(relpath)) if relpath else root
        _through_folders(root, path, relpath, make=True)
        return path

    def raw_folder(self, kb: str) -> Path:
        """The KB's folder of kept originals, made when missing; a link or a file there is
        refused (StorageError): originals are written only inside the data home."""
        raw = self.locations.raw_dir(kb)
        for folder in (raw.parent, raw):
            if not _is_folder(folder, make=folder == raw):
                raise StorageError(
                    f"{folder} is missing, a link or a file, not a folder: originals are not "
                    "kept until it is a folder",
                    path=str(folder),
                )
        return raw

    def shown(self, kb: str, path: Path) -> str:
        """A path below the KB's root as people know it, for a message: under the folder
        they attached (where its link says), not where links on the way resolve to."""
        root = self._roots.get(kb)
        if root is None or not inside(str(path), str(root)):
            return str(path)
        return str(self.locations.docs_folder(kb) / path.relative_to(root))

    def holds(self, kb: str, path: Path) -> bool:
        """Whether a folder really is below the KB's root (as last checked)."""
        root = self._roots.get(kb)
        return root is not None and inside(os.path.realpath(path), str(root))


def _through_folders(root: Path, below: Path, relpath: str, *, make: bool) -> bool:
    """Whether every folder from `root` down to `below` is a folder and not a link (made
    when missing and `make`); False when one is missing; PathRefused when one is a link or
    a file."""
    folder = root
    for part in below.relative_to(root).parts:
        folder = folder / part
        if not _is_folder(folder, make=make):
            if not os.path.lexists(folder):
                return False
            raise PathRefused(
                f"{relpath} is below {folder.relative_to(root)}, which is a link or a "
                "file, not a folder of the knowledge base",
                path=relpath,
            )
    return True


def _is_folder(path: Path, *, make: bool) -> bool:
    """Whether `path` is a folder and not a link; made first when missing and `make`."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except FileNotFoundError:
        if not make:
            return False
    with contextlib.suppress(FileExistsError):
        make_folder(path)  # with its parent's permissions: a folder of yours stays as yours
    return stat.S_ISDIR(os.lstat(path).st_mode)


def printable(name: str) -> str:
    """A name read from disk as text that can be shown and sent: bytes that are not UTF-8
    (surrogate escapes) become U+FFFD."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def _overlap(a: str, b: str) -> bool:
    return inside(a, b) or inside(b, a)


# -- the data home's own folders ------------------------------------------------------------

HOME_FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NOT_A_FOLDER = {errno.ELOOP, errno.ENOTDIR, errno.EMLINK}  # a link or a file at a step


class FolderRefused(OSError):
    """A folder Coffer owns in the data home (derived/, incoming/, trash/, local/...) that
    is a link or a file: refused, never followed, until it is a folder again."""


def home_parts(home: Path, folder: Path) -> tuple[str, ...]:
    """The names from the data home down to `folder`, one of its own folders."""
    parts = folder.relative_to(home).parts
    if not parts or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"{folder} is not a folder below the data home {home}")
    return parts


@contextlib.contextmanager
def home_folder(home: Path, folder: Path, *, make: bool = False) -> Iterator[int]:
    """A handle on `folder`, one of the folders Coffer owns below the data home, walked
    from the home one name at a time without following a link (O_NOFOLLOW | O_DIRECTORY),
    so no link there, now or swapped in meanwhile, leads anywhere else. Missing folders
    are made (0700) when `make`, else FileNotFoundError; FolderRefused when one on the way
    is a link or a file. The data home itself is where the user said it is."""
    fd = os.open(home, HOME_FOLDER_FLAGS & ~os.O_NOFOLLOW)
    try:
        walked = home
        for name in home_parts(home, folder):
            walked = walked / name
            parent, fd = fd, -1
            try:
                fd = _home_step(parent, name, walked, make=make)
            finally:
                os.close(parent)
        yield fd
    finally:
        if fd >= 0:
            os.close(fd)


def _home_step(parent: int, name: str, path: Path, *, make: bool) -> int:
    try:
        try:
            return os.open(name, HOME_FOLDER_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not make:
                raise
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o700, dir_fd=parent)
        return os.open(name, HOME_FOLDER_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno in _NOT_A_FOLDER:
            raise FolderRefused(
                exc.errno, f"{path} is a link or a file, not a folder of Coffer's: not used"
            ) from None
        raise


def read_home_file(home: Path, path: Path, limit: int) -> ControlFile | None:
    """The first `limit` bytes of a file of the data home's own (local/), reached from the
    home through no link and opened without blocking; None when there is none.
    FolderRefused when a folder on the way is a link or a file, ControlFileRefused when
    the file is not a regular one."""
    try:
        with home_folder(home, path.parent) as folder:
            fd = open_home_file(folder, path.name)
    except FileNotFoundError:
        return None
    if fd is None:
        return None
    with os.fdopen(fd, "rb") as fh:
        data = fh.read(limit + 1)
    return ControlFile(data[:limit], len(data) > limit)


def write_home_file(home: Path, path: Path, data: bytes, mode: int = 0o600) -> None:
    """Replace (or make) a file of the data home's own, durably, in its folder reached from
    the home through no link (FolderRefused when one is a link or a file)."""
    with home_folder(home, path.parent, make=True) as folder:
        durable.replace(folder, path.name, data, mode)


def remove_home_file(home: Path, path: Path) -> None:
    """Remove a file of the data home's own (nothing when it or its folder is gone)."""
    with contextlib.suppress(FileNotFoundError), home_folder(home, path.parent) as folder:
        os.unlink(path.name, dir_fd=folder)
        os.fsync(folder)


def home_folder_problem(home: Path, folder: Path) -> str | None:
    """Why `folder`, one Coffer owns below the data home, is refused now (a link or a file
    on the way from the home), or None (a folder, or not there yet)."""
    walked = home
    for name in home_parts(home, folder):
        walked = walked / name
        try:
            mode = os.lstat(walked).st_mode
        except OSError:
            return None  # missing: made when first needed
        if not stat.S_ISDIR(mode):
            kind = "a link" if stat.S_ISLNK(mode) else "not a folder"
            return f"{walked} is {kind}: Coffer does not use it until it is a folder again"
    return None


def home_problems(locations: Locations, kbs: Iterable[str]) -> list[str]:
    """Why folders Coffer owns in the data home are refused now, one line each."""
    owned = locations.owned_folders(kbs)
    found = (home_folder_problem(locations.home, folder) for folder in owned)
    return list(dict.fromkeys(p for p in found if p is not None))


def remove_home_folder(home: Path, folder: Path) -> None:
    """Remove `folder`, one Coffer owns below the data home, and all it holds, from a handle
    on its parent walked through no link: a link on the way or at its end removes nothing
    outside (the link itself goes). Nothing when it is not there."""
    with contextlib.suppress(FileNotFoundError), home_folder(home, folder.parent) as parent:
        try:
            st = os.stat(folder.name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(folder.name, dir_fd=parent)
        else:
            os.unlink(folder.name, dir_fd=parent)


def open_home_file(folder: int, name: str) -> int | None:
    """A regular file in a folder of the data home, opened for reading without following a
    link or blocking (a FIFO there would never answer); None when there is none.
    ControlFileRefused when something else is there."""
    try:
        fd = os.open(
            name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder
        )
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in _NOT_A_FOLDER:
            raise ControlFileRefused(f"{name} is a link, not a regular file") from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise ControlFileRefused(f"{name} is {_kind(mode)}, not a regular file")
    os.set_blocking(fd, True)
    return fd


class HomeScratch:
    """A private folder Coffer owns in the data home for short-lived copies (the originals
    being converted), reached through no link (domain.ports.ScratchFolder)."""

    def __init__(self, home: Path, folder: Path, prefix: str = "") -> None:
        self.home = home
        self.folder = folder
        self.prefix = prefix  # of every file made here

    def clear(self) -> None:
        """Remove the folder and what a kill left in it; a link there goes, nothing else."""
        try:
            remove_home_folder(self.home, self.folder)
        except OSError as exc:  # refused or unreadable: status says so; nothing removed
            log.warning("%s is not cleared: %s", self.folder, exc)

    def new_file(self, suffix: str) -> tuple[int, Path]:
        """A new private file (0600) of an unguessable name: its handle, open for writing,
        and its path. FolderRefused when a folder on the way is a link."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        with home_folder(self.home, self.folder, make=True) as folder:
            name = f"{self.prefix}{secrets.token_hex(8)}{suffix}"
            return os.open(name, flags, 0o600, dir_fd=folder), self.folder / name
