"""The language server reads a knowledge base's files as cofferd does (principle 10): never
outside the KB's root, whatever a link in the tree or the editor's path says.

The root is the KB's docs folder as cofferd reports it, resolved (never the editor's path,
which may reach the KB through a link of its own). Below it every folder is opened relative
to its parent without following a link (`O_NOFOLLOW | O_DIRECTORY`), and the file itself
with `O_NOFOLLOW | O_NONBLOCK`, read only when it is a regular file: a note that became a
link to a secret, a folder swapped for a link at any moment, a FIFO, `..` in a path give
nothing. A name synced from macOS may be stored decomposed (NFD): it is looked for too.
Standard library only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import unicodedata
from collections.abc import Iterator
from pathlib import Path

FOLDER_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
REFUSED = {errno.ELOOP, errno.ENOTDIR, errno.EMLINK}  # a link, or a file where a folder was


def parts_of(relpath: str) -> list[str] | None:
    """The names along `relpath` (POSIX, relative), or None when it could lead out or name
    nothing (absolute, `..`, `.`, an empty part, NUL)."""
    parts = relpath.split("/")
    if not relpath or "\0" in relpath or any(p in ("", ".", "..") for p in parts):
        return None
    return parts


@contextlib.contextmanager
def _walked(root: Path, folders: list[str], missing_ok: bool = False) -> Iterator[int | None]:
    """A handle on the folder `root/folders...`, walked through no link; None when a folder
    is missing (with `missing_ok`: the walk stops there and gives None too) or refused."""
    try:
        fd = os.open(root, FOLDER_FLAGS)
    except OSError:
        yield None
        return
    try:
        for name in folders:
            found = _open_at(fd, name, FOLDER_FLAGS)
            os.close(fd)
            fd = found
            if fd < 0:
                break
        yield fd if fd >= 0 else None
    finally:
        if fd >= 0:
            os.close(fd)


def _open_at(folder: int, name: str, flags: int) -> int:
    """`name` opened in `folder` with `flags` (its NFD spelling when the NFC one is not
    there); -1 when missing or refused."""
    names = [name]
    if not name.isascii() and (nfd := unicodedata.normalize("NFD", name)) != name:
        names.append(nfd)
    for spelled in names:
        try:
            return os.open(spelled, flags, dir_fd=folder)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                return -1  # a link (ELOOP), a file where a folder was, no permission
    return -1


def read_start(root: Path | None, relpath: str, limit: int) -> str:
    """The first `limit` bytes of the regular file at `relpath` under `root`, decoded
    ('' when it is not there, is a link or lies outside)."""
    parts = parts_of(relpath) if root is not None else None
    if root is None or parts is None:
        return ""
    with _walked(root, parts[:-1]) as folder:
        if folder is None:
            return ""
        fd = _open_at(folder, parts[-1], FILE_FLAGS)
    if fd < 0:
        return ""
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""  # a FIFO or a device: never read (it could block)
        return fh.read(limit).decode("utf-8", "replace")


def file_stat(root: Path | None, relpath: str) -> os.stat_result | None:
    """The stat of the regular file at `relpath` under `root` (None as `read_start`)."""
    parts = parts_of(relpath) if root is not None else None
    if root is None or parts is None:
        return None
    with _walked(root, parts[:-1]) as folder:
        if folder is None:
            return None
        fd = _open_at(folder, parts[-1], FILE_FLAGS)
    if fd < 0:
        return None
    try:
        st = os.fstat(fd)
    finally:
        os.close(fd)
    return st if stat.S_ISREG(st.st_mode) else None


def can_make(root: Path | None, relpath: str) -> bool:
    """Whether a new file at `relpath` would really be inside `root`: every folder on the
    way that exists is a folder reached through no link (those missing would be made
    inside it), and nothing is at `relpath` yet (not even a link)."""
    parts = parts_of(relpath) if root is not None else None
    if root is None or parts is None:
        return False
    try:
        fd = os.open(root, FOLDER_FLAGS)
    except OSError:
        return False
    try:
        for n, name in enumerate(parts):
            try:
                st = os.stat(name, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                return True  # from here on everything is made inside
            except OSError:
                return False
            if n == len(parts) - 1 or not stat.S_ISDIR(st.st_mode):
                return False  # it exists already, or a link or a file is on the way
            found = _open_at(fd, name, FOLDER_FLAGS)
            if found < 0:
                return False
            os.close(fd)
            fd = found
        return False
    finally:
        os.close(fd)
