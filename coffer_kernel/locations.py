"""The one owner of every path Coffer uses; standard library only, so cofferctl, cofferd and
the generated service units all read the same answer.

Environment overrides:

* ``COFFER_HOME``: the data home. Default: the platform's user data directory
  (``$XDG_DATA_HOME/coffer``, else ``~/.local/share/coffer``; on macOS
  ``~/Library/Application Support/coffer``).
* ``COFFER_SOCKET``: the daemon's Unix socket. Default: ``coffer/cofferd.sock`` in the user
  runtime directory (``$XDG_RUNTIME_DIR``, else ``/run/user/<uid>`` when it is ours, else
  a private ``coffer-<uid>`` folder in the temporary directory; on macOS
  ``~/Library/Caches/TemporaryItems``).

Layout of the data home::

    coffer.db                      derived index (+ audit); deleting it loses only time
    cofferd.lock                   held by the running daemon
    incoming/                      uploads in flight
    incoming/converting/           copies of originals being converted
    converter/                     the converter's home, cache and temp folder
    models/                        local embedding models (assembled, not downloaded)
    local/<kb>.yaml                this machine's own settings of a KB (providers, URLs,
                                   credentials, local paths, automatic actions)
    local/<kb>.sources.json        originals this machine tracks (source_path per document)
    local/<kb>.attached.json       the folder this machine attached as the KB's docs, with
                                   its identity (device, inode): a docs link is followed
                                   only when it leads there
    knowledge/<kb>/kb.yaml         the knowledge base's portable settings
    knowledge/<kb>/docs/           Markdown files: the truth
    knowledge/<kb>/docs -> DIR     ... or a link to a folder of the user's, attached where
                                   it lives (indexing never writes there)
    knowledge/<kb>/raw/            originals of converted documents
    derived/<kb>/<ab>/<sha256>.md  text converted from a document indexed where it lies (a
                                   PDF, a Word file), by the original's content hash;
                                   `.failed` beside it says why it could not be; derived
                                   like the index: deleting it only costs time
    trash/<kb>/<trash id>/         a deleted document, kept for the trash retention,
                                   then purged:
      manifest.json                  what the entry holds and where it came from
      document.md                    its Markdown file
      raw/<id>.<ext>                 its kept original, if it had one

Every folder Coffer owns here is used only while it is a folder, never through a link
(infrastructure.files.confinement).
"""

from __future__ import annotations

import os
import sys
import unicodedata
from collections.abc import Iterable, Mapping
from pathlib import Path

APP_NAME = "coffer"
SOCKET_NAME = "cofferd.sock"
SOCKET_IN_RUNTIME_DIR = f"{APP_NAME}/{SOCKET_NAME}"  # the default socket, in the runtime dir


class InvalidTreePath(ValueError):
    """A relative path or a folder name that names no place inside its tree: empty,
    absolute, or leading out of it with `..`."""


def default_home(env: Mapping[str, str]) -> Path:
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / APP_NAME
    base = env.get("XDG_DATA_HOME", "")
    root = Path(base) if os.path.isabs(base) else Path.home() / ".local" / "share"
    return root / APP_NAME


def runtime_dir(env: Mapping[str, str]) -> Path:
    """The user's runtime directory (sockets live there), without the app's folder."""
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "TemporaryItems"
    base = env.get("XDG_RUNTIME_DIR", "")
    if os.path.isabs(base) and os.path.isdir(base):
        return Path(base)
    run_user = Path(f"/run/user/{os.getuid()}")
    if run_user.is_dir() and run_user.stat().st_uid == os.getuid():
        return run_user
    import tempfile  # seldom needed, and ~6 ms of every cofferctl start

    return Path(tempfile.gettempdir()) / f"{APP_NAME}-{os.getuid()}"


def default_socket(env: Mapping[str, str]) -> Path:
    return runtime_dir(env) / SOCKET_IN_RUNTIME_DIR


def chosen_socket(env: Mapping[str, str] | None = None) -> Path | None:
    """The socket COFFER_SOCKET names, or None when the default is used."""
    env = os.environ if env is None else env
    return Path(env["COFFER_SOCKET"]).expanduser().absolute() if env.get("COFFER_SOCKET") else None


def socket_from_env(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return chosen_socket(env) or default_socket(env)


def home_from_env(env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    if env.get("COFFER_HOME"):
        return Path(env["COFFER_HOME"]).expanduser().absolute()
    return default_home(env)


def check_relpath(relpath: str) -> str:
    """A path inside a docs tree: relative, POSIX, no '..', no empty parts."""
    if not relpath or any(p in ("..", ".", "") for p in relpath.split("/")):
        raise InvalidTreePath(f"invalid document path: {relpath[:200]!r}")
    return relpath


def normalize_relpath(relpath: str) -> str:
    """NFC, so a KB synced between macOS (NFD names) and Linux keeps its document ids."""
    return unicodedata.normalize("NFC", relpath)


def _folder_name(name: str) -> str:
    if not name or name in (".", "..") or "/" in name or "\0" in name:
        raise InvalidTreePath(f"invalid knowledge base folder name: {name[:200]!r}")
    return name


# Plain classes, not dataclasses: cofferctl imports this module at every start, and
# importing dataclasses (with inspect) would cost it ~10 ms.


class TrashEntryFiles:
    """The files of one entry of a KB's trash (`trash/<kb>/<trash id>/`)."""

    __slots__ = ("folder",)

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @property
    def manifest(self) -> Path:
        return self.folder / "manifest.json"

    @property
    def document(self) -> Path:
        return self.folder / "document.md"

    @property
    def originals(self) -> Path:
        return self.folder / "raw"

    def original(self, name: str) -> Path:
        return self.originals / check_relpath(name)


CONVERTED_TEXT = ".md"  # the suffix of a converted text in derived/ (<sha256>.md)


class Locations:
    """The data home and the daemon's socket, and every path under the data home."""

    __slots__ = ("home", "socket")

    def __init__(self, home: Path, socket: Path) -> None:
        self.home = home
        self.socket = socket

    def __repr__(self) -> str:
        return f"Locations(home={self.home!r}, socket={self.socket!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Locations):
            return NotImplemented
        return (self.home, self.socket) == (other.home, other.socket)

    def __hash__(self) -> int:
        return hash((self.home, self.socket))

    def replace(self, *, home: Path | None = None, socket: Path | None = None) -> Locations:
        """These locations with another data home or socket."""
        return Locations(home or self.home, socket or self.socket)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Locations:
        return cls(home=home_from_env(env), socket=socket_from_env(env))

    @property
    def db_path(self) -> Path:
        return self.home / "coffer.db"

    @property
    def lock_path(self) -> Path:
        return self.home / "cofferd.lock"

    @property
    def incoming_dir(self) -> Path:
        """Uploads stream here before they are checked (same filesystem as the KBs)."""
        return self.home / "incoming"

    @property
    def models_dir(self) -> Path:
        """Local embedding models assembled from installed packages."""
        return self.home / "models"

    @property
    def knowledge_root(self) -> Path:
        return self.home / "knowledge"

    @property
    def local_dir(self) -> Path:
        """This machine's own settings; never inside a KB folder, which may be synced."""
        return self.home / "local"

    def local_settings_path(self, kb: str) -> Path:
        return self.local_dir / f"{_folder_name(kb)}.yaml"

    def attachment_path(self, kb: str) -> Path:
        """The folder this machine attached as the KB's docs, by identity (confinement)."""
        return self.local_dir / f"{_folder_name(kb)}.attached.json"

    def tracked_sources_path(self, kb: str) -> Path:
        return self.local_dir / f"{_folder_name(kb)}.sources.json"

    def kb_dir(self, kb: str) -> Path:
        return self.knowledge_root / _folder_name(kb)

    def kb_config_path(self, kb: str) -> Path:
        return self.kb_dir(kb) / "kb.yaml"

    def docs_dir(self, kb: str) -> Path:
        """The KB's docs folder as Coffer reaches it (for an attached folder, the link)."""
        return self.kb_dir(kb) / "docs"

    def attached_folder(self, kb: str) -> Path | None:
        """The user's folder a KB is attached to, or None for a folder in the data home."""
        try:
            return Path(os.readlink(self.docs_dir(kb)))
        except OSError:  # not a link (or no folder at all)
            return None

    def attached_folders(self) -> list[Path]:
        """Every folder attached as a knowledge base, in the order of the KBs' names."""
        root = self.knowledge_root
        names = sorted(p.name for p in root.iterdir()) if root.is_dir() else []
        return [f for name in names if (f := self.attached_folder(name)) is not None]

    def docs_folder(self, kb: str) -> Path:
        """Where the KB's Markdown files really are, as people know the place."""
        return self.attached_folder(kb) or self.docs_dir(kb)

    def raw_dir(self, kb: str) -> Path:
        return self.kb_dir(kb) / "raw"

    @property
    def trash_root(self) -> Path:
        return self.home / "trash"

    def trash_dir(self, kb: str) -> Path:
        """Deleted documents of a KB; in the data home, never in a folder of the user's."""
        return self.trash_root / _folder_name(kb)

    @property
    def derived_root(self) -> Path:
        return self.home / "derived"

    def derived_dir(self, kb: str) -> Path:
        """Text converted from a KB's documents in other formats; in the data home, never
        in a folder of the user's."""
        return self.derived_root / _folder_name(kb)

    @property
    def converting_dir(self) -> Path:
        """Copies of originals being converted (a converter reads only these)."""
        return self.incoming_dir / "converting"

    @property
    def converter_home(self) -> Path:
        """The converter's home, cache and temp folder: the libraries it loads (onnxruntime,
        magika) write there, never in the user's home or /tmp."""
        return self.home / "converter"

    def owned_folders(self, kbs: Iterable[str] = ()) -> list[Path]:
        """Every folder Coffer owns in the data home (those of the KBs named too), each
        kept by the daemon and never followed through a link."""
        folders = [
            self.incoming_dir,
            self.converting_dir,
            self.converter_home,
            self.models_dir,
            self.local_dir,
            self.knowledge_root,
            self.derived_root,
            self.trash_root,
        ]
        for kb in kbs:
            folders += [self.derived_dir(kb), self.trash_dir(kb)]
        return folders

    def trash_entry(self, kb: str, trash_id: str) -> TrashEntryFiles:
        return TrashEntryFiles(self.trash_dir(kb) / _folder_name(trash_id))

    def doc_path(self, kb: str, relpath: str) -> Path:
        """Absolute path of a document given its path relative to the KB's docs folder."""
        return self.docs_dir(kb) / check_relpath(relpath)

    def raw_path(self, kb: str, doc_id: str, ext: str) -> Path:
        return self.raw_file(kb, f"{doc_id}.{ext}" if ext else doc_id)

    def raw_file(self, kb: str, name: str) -> Path:
        """An original in raw/ by its file name (`<document id>.<ext>`)."""
        return self.raw_dir(kb) / check_relpath(name)

    def split(self, path: str | Path) -> tuple[str, str | None] | None:
        """(kb, path inside its docs/, or None for the KB's own folder, docs/ or kb.yaml),
        for a path under knowledge/; None for anything else (raw/ originals included)."""
        try:
            parts = Path(path).relative_to(self.knowledge_root).parts
        except ValueError:
            return None
        if not parts:
            return None
        if len(parts) == 1 or (len(parts) == 2 and parts[1] in ("docs", "kb.yaml")):
            return parts[0], None
        if parts[1] != "docs":
            return None
        return parts[0], normalize_relpath("/".join(parts[2:]))
