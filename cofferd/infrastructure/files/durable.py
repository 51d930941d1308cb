"""Durable file writes in an open folder: a private temporary file of an unguessable name
beside the file, fsync, rename (or link, never over a file), fsync the folder; and the
permissions of what is made in a folder of the user's. Callers reach the folder through
no link first (dir_handles for a KB's folders, confinement.home_folder for the data
home's)."""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from pathlib import Path

# a filesystem that cannot hard-link (FAT, exFAT, some network shares) says one of these
NO_LINKS = {errno.EXDEV, errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK}


def replace(folder: int, name: str, data: bytes, mode: int) -> None:
    """Replace (or make) the file `name` in `folder` with `data`, durably: a private
    temporary file beside it, fsync, rename, fsync the folder."""
    tmp = written(folder, name, data, mode)
    try:
        os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
    except BaseException:
        discard(folder, tmp)
        raise
    os.fsync(folder)


def create(folder: int, name: str, data: bytes, mode: int) -> None:
    """Make the new file `name` in `folder`, whole and durable, never over a file there (in
    any case or form the filesystem takes for the same name): FileExistsError."""
    tmp = written(folder, name, data, mode)
    try:
        link_new(folder, tmp, folder, name)
    finally:
        discard(folder, tmp)
    os.fsync(folder)


def link_new(src_folder: int, src: str, dst_folder: int, dst: str) -> None:
    """Give the file `src` the name `dst` too, never over a file there (FileExistsError): a
    hard link, or a rename where the filesystem has none."""
    try:
        os.link(src, dst, src_dir_fd=src_folder, dst_dir_fd=dst_folder, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in NO_LINKS:
            raise
        with contextlib.suppress(FileNotFoundError):
            os.stat(dst, dir_fd=dst_folder, follow_symlinks=False)
            raise FileExistsError(errno.EEXIST, "file exists", dst) from None
        os.rename(src, dst, src_dir_fd=src_folder, dst_dir_fd=dst_folder)


def written(folder: int, name: str, data: bytes, mode: int) -> str:
    """A hidden temporary file in `folder`, of an unpredictable name, holding `data`, synced,
    with `mode`."""
    fd, tmp = temporary(folder, name)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
    except BaseException:
        discard(folder, tmp)
        raise
    return tmp


def temporary(folder: int, name: str) -> tuple[int, str]:
    """A new private file in `folder` named after `name` and an unguessable part: its
    handle, open for writing, and its name."""
    for _ in range(100):
        tmp = f".{name[:200]}.{secrets.token_hex(6)}.tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            return os.open(tmp, flags, 0o600, dir_fd=folder), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", name)


def discard(folder: int, name: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(name, dir_fd=folder)


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
