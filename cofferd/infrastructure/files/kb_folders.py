"""Knowledge bases on disk: a folder under knowledge/ with its portable kb.yaml, plus this
machine's own settings of it in the data home (local/<kb>.yaml).

The folder is self-contained, so one copied or synced in from another machine is adopted
with its portable settings. Whatever of the machine-local kind it carries (a provider, a
URL, a credential, a local path, an automatic action) is ignored and reported, never
used: a folder is data, not authority. A folder with a docs/ tree and no kb.yaml is
adopted with defaults.

An attached KB keeps its settings and originals here too; its docs/ is a link to the
user's folder, which nothing here creates, writes or removes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Collection
from pathlib import Path
from typing import Any

import yaml

from coffer_kernel.locations import Locations
from cofferd import safe_yaml
from cofferd.domain.config import (
    KnowledgeBaseConfig,
    check_kb_name,
    join_config,
    parse_config,
    split_config,
)
from cofferd.domain.errors import CofferError, StorageError, ValidationFailed
from cofferd.domain.models import KB_KIND, KnowledgeBase, utc_now
from cofferd.infrastructure.files.confinement import (
    Boundary,
    ControlFileRefused,
    FolderRefused,
    printable,
    read_control_file,
    remove_home_file,
    remove_home_folder,
    write_home_file,
)
from cofferd.infrastructure.files.durable import umask_mode

log = logging.getLogger(__name__)

HEADER = "# Coffer knowledge base settings. Edit with `cofferctl kb set`, or here.\n"
LOCAL_HEADER = (
    "# This machine's own settings of a Coffer knowledge base (providers, URLs, credentials,\n"
    "# local paths, automatic actions). Never synced. Edit with `cofferctl kb set`, or here.\n"
)


SETTINGS_MAX = 256 * 1024  # settings larger than this are not written by hand
SETTINGS_MAX_VALUES = 10_000  # with every YAML alias expanded (safe_yaml)
SETTINGS_MAX_DEPTH = 32


class SettingsUnreadable(ValueError):
    pass


def _read_yaml(path: Path, home: Path | None = None) -> dict[str, Any]:
    try:
        found = read_control_file(path, SETTINGS_MAX, home=home)
        if found is None:
            return {}
        if found.cut:
            raise SettingsUnreadable(f"it is over {SETTINGS_MAX // 1024} KB")
        text = found.data.decode("utf-8")
        data = (
            safe_yaml.load(text, max_nodes=SETTINGS_MAX_VALUES, max_depth=SETTINGS_MAX_DEPTH) or {}
        )
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ControlFileRefused) as exc:
        raise SettingsUnreadable(str(exc)[:300]) from None
    except safe_yaml.YamlTooLarge as exc:
        raise SettingsUnreadable(f"{exc}: it is not read") from None
    if not isinstance(data, dict):
        raise SettingsUnreadable("it must hold a mapping")
    return data


def _overlap(a: Path, b: Path) -> bool:
    return a == b or a.is_relative_to(b) or b.is_relative_to(a)


def _ignored(config: dict[str, Any], portable: dict[str, Any]) -> list[str]:
    """Machine-local keys a KB folder carried (and that are therefore not used)."""
    found = [k for k in config if k not in portable]
    embedding = config.get("embedding")
    if isinstance(embedding, dict):
        kept = portable.get("embedding") or {}
        found += [f"embedding.{k}" for k in embedding if k not in kept]
    return sorted(found)


class KBFiles:
    def __init__(self, locations: Locations, boundary: Boundary) -> None:
        self.locations = locations
        self.boundary = boundary

    def names(self) -> list[str]:
        return [name for name, why in self._folders().items() if why is None]

    def refusals(self) -> dict[str, str]:
        """Folders in knowledge/ that are not adopted as KBs, each with why."""
        return {name: why for name, why in self._folders().items() if why is not None}

    def _folders(self) -> dict[str, str | None]:
        root = self.locations.knowledge_root
        try:
            children = sorted(os.listdir(root))
        except FileNotFoundError:
            return {}
        found: dict[str, str | None] = {}
        for child in children:
            if child.startswith("."):
                continue  # hidden: a sync tool's or an editor's, never a KB
            why = self.refusal(child)
            if (
                why is not None
                or self.locations.kb_config_path(child).is_file()
                or (self._has_docs(child))
            ):
                found[printable(child)] = why
        return found

    def refusal(self, name: str) -> str | None:
        """Why the folder knowledge/<name> is not adopted as a KB (None: it may be)."""
        try:
            check_kb_name(name)
        except CofferError as exc:
            return f"the folder's name is not a knowledge base name ({exc.message}); rename it"
        try:
            mode = os.lstat(self.locations.kb_dir(name)).st_mode
        except OSError:
            return None  # not there (any more)
        if stat.S_ISLNK(mode):
            return "the folder is a link; a knowledge base's folder must be a folder here"
        if not stat.S_ISDIR(mode):
            return "it is not a folder"
        return None

    def has_settings(self, name: str) -> bool:
        """Whether anything is where its settings file goes: a folder or a FIFO there is
        reported, never written over."""
        return os.path.lexists(self.locations.kb_config_path(name))

    def _has_docs(self, name: str) -> bool:
        return self.locations.docs_dir(name).is_dir()

    def load(self, name: str) -> KnowledgeBase | None:
        path = self.locations.kb_config_path(name)
        if self.refusal(name) is not None or (not path.is_file() and not self._has_docs(name)):
            return None
        try:
            data = _read_yaml(path)
            shared = data.get("config") or {}
            if not isinstance(shared, dict):
                raise SettingsUnreadable("config must be a mapping")
            portable, _ = split_config(shared)
            ignored = _ignored(shared, portable)
            local_path = self.locations.local_settings_path(name)
            local = _read_yaml(local_path, self.locations.home).get("config") or {}
            if not isinstance(local, dict):
                raise SettingsUnreadable(f"{local_path}: config must be a mapping")
            _, mine = split_config(local)
            config = parse_config(join_config(portable, mine))
        except (SettingsUnreadable, CofferError) as exc:
            problem = exc.message if isinstance(exc, CofferError) else str(exc)
            return KnowledgeBase(
                name, KnowledgeBaseConfig(), True, utc_now(), f"{path}: {problem}"[:500]
            )
        attached = self.locations.attached_folder(name)
        return KnowledgeBase(
            name=name,
            config=config,
            enabled=bool(data.get("enabled", True)),
            created_at=str(data.get("created_at") or utc_now()),
            ignored_settings=tuple(ignored),
            attached=str(attached) if attached else None,
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
        path = self.locations.kb_config_path(kb.name)
        write_home_file(self.locations.home, path, text.encode(), umask_mode())
        local_path = self.locations.local_settings_path(kb.name)
        if local:
            mine = LOCAL_HEADER + yaml.safe_dump({"config": local}, sort_keys=False)
            write_home_file(self.locations.home, local_path, mine.encode())
        else:
            remove_home_file(self.locations.home, local_path)

    def create_folders(self, name: str) -> None:
        docs = self.locations.docs_dir(name)
        if not docs.is_symlink():  # an attached folder that is away (unmounted) stays away
            docs.mkdir(parents=True, exist_ok=True)
        try:
            self.boundary.raw_folder(name)
        except (OSError, StorageError) as exc:  # only adding converted documents fails
            log.warning("%s; originals cannot be kept until it is fixed", exc)

    def check_attachable(self, folder: Path, kb: str | None = None) -> Path:
        """The folder, resolved, if a KB (`kb`, when it is attached again) may index it in
        place; ValidationFailed if not."""
        if "\0" in str(folder):
            raise ValidationFailed("path cannot hold a NUL character", field="path")
        if not folder.is_absolute():
            raise ValidationFailed(f"{folder} is not an absolute path", field="path")
        try:
            real = folder.resolve(strict=True)
        except OSError as exc:
            raise ValidationFailed(
                f"{folder} cannot be used: {exc.strerror}", field="path"
            ) from None
        if not real.is_dir():
            raise ValidationFailed(f"{folder} is not a folder", field="path")
        if not os.access(real, os.R_OK | os.X_OK):
            raise ValidationFailed(f"{folder} cannot be read by cofferd", field="path")
        home = self.locations.home.resolve()
        if _overlap(real, home):
            raise ValidationFailed(
                f"{folder} overlaps Coffer's data home {home}; attach a folder outside it",
                field="path",
            )
        for other in self.names():
            theirs = self.locations.attached_folder(other)
            if other != kb and theirs is not None and _overlap(real, theirs.resolve()):
                raise ValidationFailed(
                    f"{folder} overlaps {theirs}, attached to the knowledge base {other!r}: "
                    "a file would be indexed twice",
                    field="path",
                )
        return real

    def attach(self, name: str, folder: Path) -> None:
        """Make the KB's docs/ a link to the user's folder (checked by check_attachable),
        and remember the folder's identity as this machine's own setting."""
        kb_dir = self.locations.kb_dir(name)
        kb_dir.mkdir(parents=True, exist_ok=True)
        self._link(name, folder)
        self.create_folders(name)

    def reattach(self, name: str, folder: Path) -> None:
        """Point an attached KB's docs/ at `folder` (checked) and trust it on this machine:
        its link came by a sync, or its folder was replaced or moved."""
        docs = self.locations.docs_dir(name)
        if os.path.lexists(docs) and not docs.is_symlink():
            raise ValidationFailed(
                f"{name!r} keeps its documents in the data home ({docs}); only a knowledge "
                "base attached to a folder of yours can be attached again",
                field="path",
            )
        self._link(name, folder)

    def _link(self, name: str, folder: Path) -> None:
        docs = self.locations.docs_dir(name)
        fresh = docs.with_name(f".docs.{os.urandom(8).hex()}")  # then renamed over docs
        os.symlink(folder, fresh, target_is_directory=True)
        os.replace(fresh, docs)
        self.boundary.record(name, folder)

    def unrecorded_links(self) -> list[str] | None:
        """Attached KBs whose link has no recorded identity, when a data home from before
        identities were recorded is opened for the first time; None once it has been."""
        if self._links_recorded.exists():
            return None
        return [
            name
            for name in self.names()
            if self.locations.attached_folder(name) is not None
            and self.boundary.attachment(name) is None
        ]

    def trust_existing_links(self, indexed: Collection[str]) -> None:
        """Once: the links of the KBs this machine has already indexed (`indexed`, of
        `unrecorded_links`) were made here, and are recorded as attached."""
        for name in indexed:
            folder = self.locations.attached_folder(name)
            if folder is None:
                continue
            try:
                self.boundary.record(name, self.check_attachable(folder, name))
            except (ValidationFailed, OSError) as exc:
                message = exc.message if isinstance(exc, ValidationFailed) else str(exc)
                log.warning("%s: its attached folder is not trusted: %s", name, message)
        write_home_file(self.locations.home, self._links_recorded, b"")

    @property
    def _links_recorded(self) -> Path:
        return self.locations.local_dir / ".attachments-recorded"

    def remove(self, name: str) -> None:
        # rmtree unlinks links, never what they point to: an attached folder stays whole
        remove_home_folder(self.locations.home, self.locations.kb_dir(name))
        with contextlib.suppress(FolderRefused):  # trash/ is a link: what it leads to stays
            remove_home_folder(self.locations.home, self.locations.trash_dir(name))
        remove_home_file(self.locations.home, self.locations.local_settings_path(name))
        remove_home_file(self.locations.home, self.locations.tracked_sources_path(name))
        self.boundary.forget(name)

    def originals_bytes(self, name: str) -> int:
        """Bytes of the originals kept in raw/ (the Markdown is counted by the index)."""
        total = 0
        raw = self.locations.raw_dir(name)
        for path in raw.rglob("*") if raw.is_dir() else ():
            with contextlib.suppress(OSError):
                if path.is_file() and not path.is_symlink():
                    total += path.stat().st_size
        return total
