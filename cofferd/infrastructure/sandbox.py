"""What the daemon's own view of the file system hides from it.

Run as a systemd service with PrivateTmp=yes, cofferd has a /tmp and /var/tmp of its own:
a file the user sees in /tmp does not exist for the daemon. This is read from the mount
table (`/proc/self/mountinfo`): systemd mounts those folders from a `systemd-private-*`
directory.
"""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)

MOUNTINFO = Path("/proc/self/mountinfo")
PRIVATE_MARK = "systemd-private-"


def private_folders(mountinfo: Path = MOUNTINFO) -> tuple[Path, ...]:
    """The folders that are this process's own (PrivateTmp), not the user's."""
    try:
        lines = mountinfo.read_text().splitlines()
    except OSError:  # not Linux, or no /proc: nothing is known to be private
        return ()
    found = []
    for line in lines:
        fields = line.split()
        if len(fields) > 4 and PRIVATE_MARK in fields[3] and fields[4] in ("/tmp", "/var/tmp"):
            found.append(Path(fields[4]))
    if found:
        log.info("private folders (a service sandbox): %s", ", ".join(map(str, found)))
    return tuple(found)
