"""The two systemd protocols cofferd speaks: readiness (sd_notify) and socket activation."""

from __future__ import annotations

import contextlib
import os
import socket

SD_LISTEN_FDS_START = 3


def notify(message: str) -> bool:
    """Send e.g. `READY=1` to $NOTIFY_SOCKET; False when not run under a service manager."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]  # abstract namespace
    with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
        s.connect(address)
        s.sendall(message.encode())
        return True
    return False


def inherited_socket() -> socket.socket | None:
    """The listening socket passed by socket activation (LISTEN_FDS/LISTEN_PID), if any."""
    if os.environ.get("LISTEN_PID") != str(os.getpid()):
        return None
    try:
        count = int(os.environ.get("LISTEN_FDS", "0"))
    except ValueError:
        return None
    for name in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        os.environ.pop(name, None)  # not for our children
    if count < 1:
        return None
    sock = socket.socket(fileno=SD_LISTEN_FDS_START)
    sock.setblocking(False)
    return sock
