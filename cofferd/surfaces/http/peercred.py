"""The uid of the process at the other end of a Unix socket."""

from __future__ import annotations

import socket
import struct
import sys

_LOCAL_PEERCRED = 0x001  # macOS <sys/un.h>; SOL_LOCAL is 0
_XUCRED = struct.Struct("IIh16I")  # cr_version, cr_uid, cr_ngroups, cr_groups[16]


def peer_uid(sock: socket.socket) -> int | None:
    if hasattr(socket, "SO_PEERCRED"):  # Linux: struct ucred {pid, uid, gid}
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _, uid, _ = struct.unpack("3i", creds)
        return int(uid)
    if sys.platform == "darwin":
        raw = sock.getsockopt(0, _LOCAL_PEERCRED, _XUCRED.size)
        return int(_XUCRED.unpack(raw[: _XUCRED.size])[1])
    return None
