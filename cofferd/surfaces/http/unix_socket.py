"""Binding the daemon's Unix socket safely: 0700 folder, 0600 socket, stale sockets replaced
only when they are ours and nobody answers on them."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
from pathlib import Path


class SocketInUse(RuntimeError):
    pass


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
    st = folder.stat()
    if st.st_uid == os.getuid() and st.st_mode & 0o077 and not st.st_mode & stat.S_ISVTX:
        os.chmod(folder, 0o700)  # our own folder, too open: close it (never /tmp-like ones)
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
