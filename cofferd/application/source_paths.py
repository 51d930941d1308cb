"""Which files on this machine may be added by path, and by whom.

A path is resolved to the file it really is, then refused when:

* the path itself is a symlink (a link named `notes.txt` can point anywhere);
* it is not a regular file;
* it lies in a system folder (`/etc`, `/proc`, `/sys`, `/dev`, `/boot`, `/run`, `/var/lib`),
  in the data home, or under any hidden name (`~/.ssh`, `~/.gnupg`, `~/.aws`,
  `~/.docker`, `~/.config`, `.env`, ...): credentials live there, documents rarely do;
* the caller is an agent and the file is not under one of the folders the user opened to
  agents (`--agent-root`, none by default).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from cofferd.domain.errors import PathRefused, ValidationFailed

SYSTEM_FOLDERS = ("/etc", "/proc", "/sys", "/dev", "/boot", "/run", "/var/lib", "/private/etc")
AGENT_ACTORS = "agent"  # actors of MCP calls are `agent` or `agent:<client name>`


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def check_source(given: str, *, actor: str, agent_roots: Sequence[Path], data_home: Path) -> Path:
    """The real path of a file the caller may add, or PathRefused saying why not."""
    path = Path(given).expanduser()
    if not path.is_absolute():
        raise ValidationFailed("source_path must be absolute", field="source_path")
    if path.is_symlink():
        raise PathRefused(f"{given} is a symlink; add the file it points to", path=given)
    real = os.path.realpath(path)
    for folder in (*SYSTEM_FOLDERS, os.path.realpath(data_home)):
        if _under(real, folder):
            raise PathRefused(f"files under {folder} are not added", path=given)
    if any(part.startswith(".") for part in Path(real).parts):
        raise PathRefused(
            "files in hidden folders or with hidden names are not added (credentials live "
            "there); copy the document somewhere else first",
            path=given,
        )
    if actor.split(":", 1)[0] == AGENT_ACTORS and not any(
        _under(real, os.path.realpath(root)) for root in agent_roots
    ):
        raise PathRefused(
            "agents may add files only from the folders the user opened to them "
            "(cofferd --agent-root); none allows this one",
            path=given,
        )
    if not os.path.isfile(real):
        raise ValidationFailed(f"{given} is not a file", field="source_path")
    return Path(real)
