"""Knowledge bases on disk: each is a folder under knowledge/ with its own kb.yaml.

The folder is self-contained, so one copied or synced in from another machine is adopted
with its settings. A folder with a docs/ tree and no kb.yaml is adopted with defaults.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from typing import Any

import yaml

from cofferd.domain.config import KnowledgeBaseConfig, check_kb_name, parse_config
from cofferd.domain.errors import CofferError
from cofferd.domain.models import KB_KIND, KnowledgeBase, utc_now
from cofferd.infrastructure.fsutil import atomic_write
from cofferd.locations import Locations

log = logging.getLogger(__name__)

HEADER = "# Coffer knowledge base settings. Edit with `cofferctl kb set`, or here.\n"


class KBFiles:
    def __init__(self, locations: Locations) -> None:
        self.locations = locations

    def names(self) -> list[str]:
        root = self.locations.knowledge_root
        if not root.is_dir():
            return []
        found = []
        for child in sorted(root.iterdir()):
            try:
                name = check_kb_name(child.name)
            except CofferError:
                continue
            if self.locations.kb_config_path(name).is_file() or self._has_docs(name):
                found.append(name)
        return found

    def has_settings(self, name: str) -> bool:
        return self.locations.kb_config_path(name).is_file()

    def _has_docs(self, name: str) -> bool:
        return self.locations.docs_dir(name).is_dir()

    def load(self, name: str) -> KnowledgeBase | None:
        path = self.locations.kb_config_path(name)
        if not path.is_file():
            if self._has_docs(name):
                return KnowledgeBase(name, KnowledgeBaseConfig(), True, utc_now())
            return None
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
            if not isinstance(data, dict):
                raise ValueError("kb.yaml must hold a mapping")
            config = parse_config(data.get("config") or {})
        except (OSError, ValueError, yaml.YAMLError, CofferError) as exc:
            log.error("%s: %s; using default settings until it is fixed", path, exc)
            problem = exc.message if isinstance(exc, CofferError) else str(exc)
            return KnowledgeBase(
                name, KnowledgeBaseConfig(), True, utc_now(), f"{path}: {problem}"[:500]
            )
        return KnowledgeBase(
            name=name,
            config=config,
            enabled=bool(data.get("enabled", True)),
            created_at=str(data.get("created_at") or utc_now()),
        )

    def save(self, kb: KnowledgeBase) -> None:
        data: dict[str, Any] = {
            "kind": KB_KIND,
            "created_at": kb.created_at,
            "enabled": kb.enabled,
            "config": kb.config.model_dump(mode="json", exclude_unset=True),
        }
        text = HEADER + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
        atomic_write(self.locations.kb_config_path(kb.name), text.encode())

    def create_folders(self, name: str) -> None:
        self.locations.docs_dir(name).mkdir(parents=True, exist_ok=True)
        self.locations.raw_dir(name).mkdir(parents=True, exist_ok=True)

    def remove(self, name: str) -> None:
        shutil.rmtree(self.locations.kb_dir(name))

    def originals_bytes(self, name: str) -> int:
        """Bytes of the originals kept in raw/ (the Markdown is counted by the index)."""
        total = 0
        raw = self.locations.raw_dir(name)
        for path in raw.rglob("*") if raw.is_dir() else ():
            with contextlib.suppress(OSError):
                if path.is_file() and not path.is_symlink():
                    total += path.stat().st_size
        return total
