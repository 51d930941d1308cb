"""Writes inside a knowledge base through directory handles, so that no folder swapped for
a link at any moment can redirect one.

A path checked and then used again by name can name another place by the time it is used
(a sync tool or another program swaps `notes/` for a link to `/etc` between the two). Here
the root is opened once, checked to be the folder the Boundary checked (for an attached
folder: the device and inode this machine recorded), and every folder below it is opened
relative to its parent without following a link (`O_NOFOLLOW | O_DIRECTORY`). Files are
then created, renamed and unlinked relative to the open folder (`dir_fd`), so what is
written is always inside the folder that was opened.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from coffer_kernel.locations import check_relpath
from cofferd.domain.errors import KBUnavailable, PathRefused
from cofferd.infrastructure.files.confined_read import disk_path
from cofferd.infrastructure.files.confinement import Boundary
from cofferd.infrastructure.files.durable import NO_LINKS, discard, link_new, temporary

FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
COPY_BLOCK = 1024 * 1024
REFUSED = {errno.ELOOP, errno.ENOTDIR, errno.EMLINK}  # a link or a file where a folder was


@contextlib.contextmanager
def kb_folder(boundary: Boundary, kb: str, folder: str, *, make: bool) -> Iterator[int]:
    """A handle on `folder` (relative; "" the root) of the KB, checked now and walked from
    the root through no link; its missing folders made when `make` (FileNotFoundError
    otherwise). PathRefused when a folder on the way is a link or a file."""
    fd = open_root(boundary, kb)
    try:
        for part in PurePosixPath(check_relpath(folder)).parts if folder else ():
            parent, fd = fd, -1  # _step closes the parent, whatever happens
            fd = _step(parent, part, folder, make=make)
        yield fd
    finally:
        if fd >= 0:
            os.close(fd)


def open_root(boundary: Boundary, kb: str) -> int:
    """The KB's root, opened and checked to be the folder the Boundary checked just now: a
    folder in the data home walked to from `knowledge/` through no link, an attached one
    by the device and inode this machine recorded."""
    root = boundary.root(kb)
    knowledge = Path(os.path.realpath(boundary.locations.knowledge_root))
    if root == knowledge / kb / "docs":
        fd = _open_folder(kb, knowledge)
        for part in (kb, "docs"):
            fd = _step(fd, part, "", make=False)
        return fd
    fd = _open_folder(kb, root)
    record = boundary.attachment(kb)
    if record is None or not record.matches(root, os.fstat(fd)):
        os.close(fd)
        raise KBUnavailable(kb, f"its folder {root} was replaced while it was opened")
    return fd


def _open_folder(kb: str, path: Path) -> int:
    try:
        return os.open(path, FOLDER_FLAGS)
    except OSError as exc:
        raise KBUnavailable(kb, f"its folder {path} cannot be opened: {exc.strerror}") from None


def _step(parent: int, name: str, relpath: str, *, make: bool) -> int:
    """The folder `name` in `parent` (which is closed), never through a link."""
    try:
        try:
            return os.open(name, FOLDER_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not make:
                raise
        with contextlib.suppress(FileExistsError):
            _make_folder(parent, name)
        return os.open(name, FOLDER_FLAGS, dir_fd=parent)
    except OSError as exc:
        if exc.errno in REFUSED:
            raise PathRefused(
                f"{relpath} is below {name}, which is a link or a file, not a folder of the "
                "knowledge base",
                path=relpath,
            ) from None
        raise
    finally:
        os.close(parent)


def _make_folder(parent: int, name: str) -> None:
    """A new folder with its parent's permissions (and set-group-id), whatever the umask."""
    os.mkdir(name, 0o700, dir_fd=parent)
    fd = os.open(name, FOLDER_FLAGS, dir_fd=parent)
    try:
        mode = stat.S_IMODE(os.fstat(parent).st_mode) & 0o777
        inherited = stat.S_IMODE(os.fstat(fd).st_mode) & stat.S_ISGID
        os.fchmod(fd, mode | inherited)
    finally:
        os.close(fd)


def file_mode(folder: int, name: str) -> int | None:
    """The permissions of the regular file `name` in `folder`; None when there is none;
    PathRefused when something else (a link, a folder, a FIFO) is there."""
    try:
        st = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise PathRefused(f"{name} is a link or not a regular file", path=name)
    return stat.S_IMODE(st.st_mode)


def folder_mode(folder: int) -> int:
    """What a file made in `folder` gets: the folder's permissions without execute."""
    return stat.S_IMODE(os.fstat(folder).st_mode) & 0o666


def unlink(folder: int, name: str) -> None:
    """Remove the regular file `name` from `folder` (nothing when it is gone already)."""
    with contextlib.suppress(FileNotFoundError):
        file_mode(folder, name)
        os.unlink(name, dir_fd=folder)
        os.fsync(folder)


def on_disk(boundary: Boundary, kb: str, relpath: str) -> tuple[str, str]:
    """The folder and name of a document as they are on disk (a name synced from macOS may
    be stored decomposed): what `kb_folder` then walks to by handles."""
    root = boundary.root(kb)
    found = disk_path(root, check_relpath(relpath)).relative_to(root).as_posix()
    folder, _, name = found.rpartition("/")
    return folder, name


@contextlib.contextmanager
def opened(path: Path) -> Iterator[int]:
    """A handle on a folder of the data home's own (never through a link at its end)."""
    fd = os.open(path, FOLDER_FLAGS)
    try:
        yield fd
    finally:
        os.close(fd)


def exists(folder: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def move(src_folder: int, src: str, dst_folder: int, dst: str) -> None:
    """Move the regular file `src` to `dst`, keeping its permissions and times; never over
    a file at `dst` (FileExistsError). Within one filesystem a hard link and an unlink (a
    rename that cannot replace); across filesystems a copy made durable before `src` goes."""
    st = os.stat(src, dir_fd=src_folder, follow_symlinks=False)
    if not stat.S_ISREG(st.st_mode):
        raise PathRefused(f"{src} is not a regular file", path=src)
    try:
        os.link(src, dst, src_dir_fd=src_folder, dst_dir_fd=dst_folder, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in NO_LINKS:
            raise
        _copy(src_folder, src, dst_folder, dst, st)
    os.fsync(dst_folder)
    os.unlink(src, dir_fd=src_folder)
    os.fsync(src_folder)


def _copy(src_folder: int, src: str, dst_folder: int, dst: str, st: os.stat_result) -> None:
    fd, tmp = temporary(dst_folder, dst)
    try:
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        with (
            os.fdopen(fd, "wb") as out,
            os.fdopen(os.open(src, flags, dir_fd=src_folder), "rb") as source,
        ):
            shutil.copyfileobj(source, out, COPY_BLOCK)
            out.flush()
            os.fchmod(out.fileno(), stat.S_IMODE(st.st_mode))
            os.utime(out.fileno(), ns=(st.st_atime_ns, st.st_mtime_ns))
            os.fsync(out.fileno())
        link_new(dst_folder, tmp, dst_folder, dst)
    finally:
        discard(dst_folder, tmp)
