"""The one owner of every filesystem path Coffer uses.

Environment overrides:

* ``COFFER_HOME``: the data home (default: the platform's user data directory).
* ``COFFER_SOCKET``: the daemon's Unix socket (default: ``cofferd.sock`` in the platform's
  user runtime directory, in a ``coffer`` folder of its own).

Layout of the data home::

    coffer.db                      derived index (+ audit); deleting it loses only time
    cofferd.lock                   held by the running daemon
    incoming/                      uploads in flight
    models/                        local embedding models (assembled, not downloaded)
    knowledge/<kb>/kb.yaml         the knowledge base's configuration
    knowledge/<kb>/docs/           Markdown files: the truth
    knowledge/<kb>/raw/            originals of converted documents
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import platformdirs

from cofferctl.socket_path import APP_NAME, default_socket
from cofferd.domain.config import check_kb_name
from cofferd.domain.errors import ValidationFailed


@dataclass(frozen=True)
class Locations:
    home: Path
    socket: Path

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Locations:
        env = os.environ if env is None else env
        home = env.get("COFFER_HOME") or str(platformdirs.user_data_path(APP_NAME))
        return cls(home=Path(home).expanduser().absolute(), socket=default_socket(dict(env)))

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

    def kb_dir(self, kb: str) -> Path:
        return self.knowledge_root / check_kb_name(kb)

    def kb_config_path(self, kb: str) -> Path:
        return self.kb_dir(kb) / "kb.yaml"

    def docs_dir(self, kb: str) -> Path:
        return self.kb_dir(kb) / "docs"

    def raw_dir(self, kb: str) -> Path:
        return self.kb_dir(kb) / "raw"

    def doc_path(self, kb: str, relpath: str) -> Path:
        """Absolute path of a document given its path relative to the KB's docs folder."""
        return self.docs_dir(kb) / check_relpath(relpath)

    def raw_path(self, kb: str, doc_id: str, ext: str) -> Path:
        name = f"{doc_id}.{ext}" if ext else doc_id
        return self.raw_dir(kb) / check_relpath(name)


def check_relpath(relpath: str) -> str:
    """A path inside a docs tree: relative, POSIX, no '..', no empty parts."""
    parts = PurePosixPath(relpath).parts
    if not parts or relpath.startswith("/") or any(p in ("..", ".", "") for p in parts):
        raise ValidationFailed("invalid document path", path=relpath)
    return relpath


def normalize_relpath(relpath: str) -> str:
    """NFC, so a KB synced between macOS (NFD names) and Linux keeps its document ids."""
    return unicodedata.normalize("NFC", relpath)
