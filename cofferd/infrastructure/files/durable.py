"""Durable file writes: a private temp file in the same folder, fsync, rename, fsync the folder;
and the permissions of what is made in a folder of the user's."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path

# a filesystem that cannot hard-link (FAT, exFAT, some network shares) says one of these
NO_LINKS = {errno.EXDEV, errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK}


def atomic_write(
    path: Path, data: bytes, mode: int | None = None, *, new_mode: int | None = None
) -> None:
    """Replace `path` with `data`. It gets `mode` when given; else an existing file keeps its
    permissions, and a new one gets `new_mode` (default: what the umask allows)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if mode is None:
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except FileNotFoundError:
            mode = umask_mode() if new_mode is None else new_mode
    tmp = _written_beside(path, data, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)


def create_new(path: Path, data: bytes, mode: int) -> None:
    """Write a new file at `path`, whole and durable, never over one that is there: a file
    there, in any case or Unicode form the filesystem takes for the same name, raises
    FileExistsError."""
    tmp = _written_beside(path, data, mode)
    try:
        link_new(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    fsync_dir(path.parent)


def link_new(tmp: str, path: Path) -> None:
    """Give the file written at `tmp` the name `path` too, never over a file there
    (FileExistsError): a hard link, or a rename where the filesystem has no links."""
    try:
        os.link(tmp, path, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in NO_LINKS:
            raise
        if os.path.lexists(path):
            raise FileExistsError(errno.EEXIST, "file exists", str(path)) from None
        os.rename(tmp, path)


def _written_beside(path: Path, data: bytes, mode: int) -> str:
    """A hidden temporary file in `path`'s folder holding `data`, synced, with `mode`."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


def umask_mode() -> int:
    """The permissions the process's umask gives a new file, read without changing it
    (setting it to read it back would change it for every thread for a moment)."""
    return 0o666 & ~_umask()


def _umask() -> int:
    found = _proc_umask()
    if found is not None:
        return found
    return 0o077 if _UMASK_AT_IMPORT is None else _UMASK_AT_IMPORT  # (/proc gone: strict)


def _proc_umask() -> int | None:
    """The umask as Linux shows it (/proc/self/status, `Umask:`), or None elsewhere."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return None


def _umask_at_import() -> int | None:
    """Where there is no /proc (macOS), the umask read once, at import, before the daemon
    starts a thread (the only way there is to set it and set it back); None on Linux, where
    it is never changed to be read."""
    if _proc_umask() is not None:
        return None
    umask = os.umask(0o077)
    os.umask(umask)
    return umask


_UMASK_AT_IMPORT = _umask_at_import()


def mode_for_files_in(folder: Path) -> int:
    """The permissions a file made in `folder` gets: the folder's, without execute (a
    folder of yours that is 0755 holds 0644 files; one that is 0700, 0600 files)."""
    return stat.S_IMODE(os.stat(folder).st_mode) & 0o666


def make_folder(path: Path) -> None:
    """Make the folder `path` (FileExistsError when something is there) with the
    permissions of the folder it is in, whatever the umask (the daemon's is 0077)."""
    os.mkdir(path, 0o700)
    parent = stat.S_IMODE(os.stat(path.parent).st_mode) & 0o777
    inherited = stat.S_IMODE(os.stat(path).st_mode) & stat.S_ISGID  # the group's folders
    os.chmod(path, parent | inherited)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
