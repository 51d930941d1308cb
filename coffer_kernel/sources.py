"""Which files on this machine may be added to a knowledge base by their path, decided in
one place: cofferd applies it to `add` by path (API, MCP) and again at every read of a
tracked source (check-sources, update-source); cofferctl applies it before it uploads a
file it was named. Standard library only, so both can.

A path is resolved to the file it really is, then refused when:

* the path itself is a symlink (a link named `notes.txt` can point anywhere);
* it is not a regular file;
* it lies in a system folder (`/etc`, `/proc`, `/sys`, `/dev`, `/boot`, `/run`, `/var/lib`),
  in the data home, or under any hidden name (`~/.ssh`, `~/.gnupg`, `~/.aws`,
  `~/.docker`, `~/.config`, `.env`, ...): credentials live there, documents rarely do;
* the caller is an agent and the file is not under one of the folders the user opened to
  agents (`--agent-root`, none by default).

Images are read by OCR, and only in a KB whose `index_formats` lists them: a folder added
whole leaves them out otherwise (IMAGE_FORMATS, with their other names).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path

IMAGE_FORMATS = ("png", "jpg", "webp")
IMAGE_SUFFIXES = (*IMAGE_FORMATS, "jpeg")

SYSTEM_FOLDERS = ("/etc", "/proc", "/sys", "/dev", "/boot", "/run", "/var/lib", "/private/etc")


class SourceRefused(ValueError):
    """A file that may not be added; `not_a_file` when it is no file at all (or missing)."""

    def __init__(self, message: str, *, not_a_file: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.not_a_file = not_a_file


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def checked_source(
    given: str, *, data_home: Path, agent_roots: Sequence[Path] | None = None
) -> Path:
    """The real path of a file that may be added, or SourceRefused saying why not.
    `agent_roots` is None for the user; for an agent, the folders opened to agents."""
    path = Path(given).expanduser()
    if "\0" in given or not path.is_absolute():
        raise SourceRefused(f"{given!r} is not an absolute path", not_a_file=True)
    if path.is_symlink():
        raise SourceRefused(f"{given} is a symlink; add the file it points to")
    real = os.path.realpath(path)
    for folder in (*SYSTEM_FOLDERS, os.path.realpath(data_home)):
        if _under(real, folder):
            raise SourceRefused(f"files under {folder} are not added")
    if any(part.startswith(".") for part in Path(real).parts):
        raise SourceRefused(
            "files in hidden folders or with hidden names are not added (credentials live "
            "there); copy the document somewhere else first"
        )
    if agent_roots is not None and not any(
        _under(real, os.path.realpath(root)) for root in agent_roots
    ):
        raise SourceRefused(
            "agents may add files only from the folders the user opened to them "
            "(cofferd --agent-root); none allows this one"
        )
    try:
        regular = stat.S_ISREG(os.stat(real).st_mode)
    except OSError:
        regular = False
    if not regular:
        raise SourceRefused(f"{given} is not a file", not_a_file=True)
    return Path(real)
