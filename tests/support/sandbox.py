"""Run a command under the file-system sandbox of the generated systemd unit, emulated with
a private mount namespace (for machines without a user systemd to run the unit itself).

    unshare -m --propagation private python tests/support/sandbox.py UNIT_FILE PRIVATE_DIR -- CMD...

ProtectSystem=strict: every mount becomes read-only. ReadWritePaths=: each path listed in
the unit is made writable again (`-` paths only when they exist). PrivateTmp=yes: /tmp and
/var/tmp are bound from PRIVATE_DIR/systemd-private-*/, as systemd does.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path


def mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def main() -> None:
    unit, private, _, *command = sys.argv[1:]
    rw: list[str] = []
    for line in Path(unit).read_text().splitlines():
        key, _, value = line.partition("=")
        if key == "ReadWritePaths":
            rw += shlex.split(value)
    assert "ProtectSystem=strict" in Path(unit).read_text()
    tmps = {}
    for folder in ("/tmp", "/var/tmp"):
        own = Path(private) / "systemd-private-coffer-sandbox" / folder.strip("/").replace("/", "-")
        own.mkdir(parents=True, exist_ok=True)
        tmps[folder] = own
    points = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    for point in sorted(set(points), key=len):
        if not point.startswith(("/proc", "/sys", "/dev")):
            subprocess.run(["mount", "-o", "remount,bind,ro", point], check=False)
    for path in rw:
        optional = path.startswith("-")
        path = path.lstrip("-")
        if optional and not os.path.exists(path):
            continue
        mount("--bind", path, path)
        mount("-o", "remount,bind,rw", path)
    for folder, own in tmps.items():
        mount("--bind", str(own), folder)
        mount("-o", "remount,bind,rw", folder)
    os.execvp(command[0], command)


if __name__ == "__main__":
    main()
