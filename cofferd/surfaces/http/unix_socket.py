"""Binding the daemon's Unix socket safely: a folder made 0700 when cofferd makes it, a folder
it did not make left as it is but refused when others could replace the socket in it, a 0600
socket, stale sockets replaced only when they are ours and nobody answers on them."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
from pathlib import Path


class SocketInUse(RuntimeError):
    pass


class UnsafeSocketFolder(RuntimeError):
    """The socket's folder lets someone else swap the socket: refused, never chmod-ed."""


def check_folder(folder: Path) -> None:
    """Refuse a folder another user owns (root aside) or may write in without the sticky bit
    (as /tmp has): there, anyone could remove the socket and answer in the daemon's place."""
    st = folder.stat()
    hint = "choose another folder with --socket (or COFFER_SOCKET)"
    if st.st_uid not in (os.getuid(), 0):
        raise UnsafeSocketFolder(
            f"the socket's folder {folder} belongs to another user (uid {st.st_uid}), who could"
            f" replace the socket; {hint}"
        )
    if st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX:
        who = "others" if st.st_mode & 0o002 else "its group"
        raise UnsafeSocketFolder(
            f"the socket's folder {folder} is writable by {who} (mode"
            f" {stat.S_IMODE(st.st_mode):o}), who could replace the socket; cofferd does not"
            f" change a folder it did not make: {hint}, or run `chmod go-w {folder}`"
        )


def is_live(path: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(path))
    except OSError:
        return False
    finally:
        probe.close()
    return True


class BoundSocket:
    """A listening socket and the file it was bound to (by inode, to recognise it later)."""

    def __init__(self, sock: socket.socket, path: Path | None) -> None:
        self.sock = sock
        self.path = path
        self._inode = path.lstat().st_ino if path else None

    def remove(self) -> None:
        """Unlink the socket file only if it is still the one we bound."""
        if self.path is None:
            return
        with contextlib.suppress(OSError):
            if self.path.lstat().st_ino == self._inode:
                self.path.unlink()


def bind(path: Path) -> BoundSocket:
    folder = path.parent
    if not folder.exists():
        folder.mkdir(mode=0o700, parents=True)
    check_folder(folder)
    if path.exists() or path.is_symlink():
        st = path.lstat()
        if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.getuid():
            raise SocketInUse(f"{path} exists and is not a socket of ours; not touching it")
        if is_live(path):
            raise SocketInUse(f"another cofferd is answering on {path}")
        path.unlink()  # stale: left by a daemon that crashed
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # No umask is set for the bind (that would change it for every thread): the socket is
    # made 0600 before it listens, and a socket that does not listen takes no connection,
    # whatever its mode was for that moment.
    try:
        sock.bind(str(path))
        os.chmod(path, 0o600)
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    sock.setblocking(False)
    return BoundSocket(sock, path)
