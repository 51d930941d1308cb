"""Knowledge bases on disk: a folder under knowledge/ with its portable kb.yaml, plus this
machine's own settings of it in the data home (local/<kb>.yaml).

The folder is self-contained, so one copied or synced in from another machine is adopted
with its portable settings. Whatever of the machine-local kind it carries (a provider, a
URL, a credential, a local path, an automatic action) is ignored and reported, never
used: a folder is data, not authority. A folder with a docs/ tree and no kb.yaml is
adopted with defaults.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from pathlib import Path
from typing import Any

import yaml

from cofferd.domain.config import (
    KnowledgeBaseConfig,
    check_kb_name,
    join_config,
    parse_config,
    split_config,
)
from cofferd.domain.errors import CofferError
from cofferd.domain.models import KB_KIND, KnowledgeBase, utc_now
from cofferd.infrastructure.fsutil import atomic_write
from cofferd.locations import Locations

log = logging.getLogger(__name__)

HEADER = "# Coffer knowledge base settings. Edit with `cofferctl kb set`, or here.\n"
LOCAL_HEADER = (
    "# This machine's own settings of a Coffer knowledge base (providers, URLs, credentials,\n"
    "# local paths, automatic actions). Never synced. Edit with `cofferctl kb set`, or here.\n"
)


class SettingsUnreadable(ValueError):
    pass


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise SettingsUnreadable(str(exc)) from None
    if not isinstance(data, dict):
        raise SettingsUnreadable("it must hold a mapping")
    return data


def _ignored(config: dict[str, Any], portable: dict[str, Any]) -> list[str]:
    """Machine-local keys a KB folder carried (and that are therefore not used)."""
    found = [k for k in config if k not in portable]
    embedding = config.get("embedding")
    if isinstance(embedding, dict):
        kept = portable.get("embedding") or {}
        found += [f"embedding.{k}" for k in embedding if k not in kept]
    return sorted(found)


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
        if not path.is_file() and not self._has_docs(name):
            return None
        try:
            data = _read_yaml(path)
            shared = data.get("config") or {}
            if not isinstance(shared, dict):
                raise SettingsUnreadable("config must be a mapping")
            portable, _ = split_config(shared)
            ignored = _ignored(shared, portable)
            local_path = self.locations.local_settings_path(name)
            local = _read_yaml(local_path).get("config") or {}
            if not isinstance(local, dict):
                raise SettingsUnreadable(f"{local_path}: config must be a mapping")
            _, mine = split_config(local)
            config = parse_config(join_config(portable, mine))
        except (SettingsUnreadable, CofferError) as exc:
            problem = exc.message if isinstance(exc, CofferError) else str(exc)
            return KnowledgeBase(
                name, KnowledgeBaseConfig(), True, utc_now(), f"{path}: {problem}"[:500]
            )
        return KnowledgeBase(
            name=name,
            config=config,
            enabled=bool(data.get("enabled", True)),
            created_at=str(data.get("created_at") or utc_now()),
            ignored_settings=tuple(ignored),
        )

    def save(self, kb: KnowledgeBase) -> None:
        portable, local = split_config(kb.config.model_dump(mode="json", exclude_unset=True))
        data: dict[str, Any] = {
            "kind": KB_KIND,
            "created_at": kb.created_at,
            "enabled": kb.enabled,
            "config": portable,
        }
        text = HEADER + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
        atomic_write(self.locations.kb_config_path(kb.name), text.encode())
        local_path = self.locations.local_settings_path(kb.name)
        if local:
            mine = LOCAL_HEADER + yaml.safe_dump({"config": local}, sort_keys=False)
            atomic_write(local_path, mine.encode(), mode=0o600)
        else:
            local_path.unlink(missing_ok=True)

    def create_folders(self, name: str) -> None:
        self.locations.docs_dir(name).mkdir(parents=True, exist_ok=True)
        raw = self.locations.raw_dir(name)
        try:
            raw.mkdir(exist_ok=True)
        except FileExistsError:  # not a folder: only adding converted documents fails
            log.warning("%s is not a folder; originals cannot be kept until it is", raw)

    def remove(self, name: str) -> None:
        shutil.rmtree(self.locations.kb_dir(name))
        self.locations.local_settings_path(name).unlink(missing_ok=True)
        self.locations.tracked_sources_path(name).unlink(missing_ok=True)

    def originals_bytes(self, name: str) -> int:
        """Bytes of the originals kept in raw/ (the Markdown is counted by the index)."""
        total = 0
        raw = self.locations.raw_dir(name)
        for path in raw.rglob("*") if raw.is_dir() else ():
            with contextlib.suppress(OSError):
                if path.is_file() and not path.is_symlink():
                    total += path.stat().st_size
        return total
