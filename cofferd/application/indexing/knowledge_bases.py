"""Knowledge bases: create, list, get, configure, enable/disable, delete (with cascade)."""

from __future__ import annotations

import asyncio
import difflib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

from cofferd.application.indexing.registry import KBRegistry
from cofferd.application.indexing.reindexer import Reindexer
from cofferd.domain.config import (
    BUNDLED_MODELS,
    KnowledgeBaseConfig,
    check_kb_name,
    merge_config,
)
from cofferd.domain.errors import KBDisabled, KBExists, KBNotFound, ValidationFailed
from cofferd.domain.events import Events, FullPassWanted, LayoutChanged
from cofferd.domain.models import KnowledgeBase, ReindexResult, utc_now
from cofferd.domain.ports import ActivityLog, KBIndex, KBRepository

DEFAULT_KB = "notes"


class SettingsUpdate(NamedTuple):
    kb: KnowledgeBase
    reindex: ReindexResult | None  # never waited for: the pass runs in the background
    rechunked: bool  # the chunking changed: every document is chunked again
    warnings: list[str]  # settings saved that cannot work here yet (a credential not found)
    reindexing: str | None  # why a pass over every document now runs in the background
    notices: list[dict[str, str]]  # what else to set for the change to work: code, message, command


class PendingPass(NamedTuple):
    """A pass over every document that settings asked for: what changed (each once, however
    many changes asked), and which change asked last (a pass that began before a later
    change does not settle it)."""

    changed: tuple[str, ...]
    change: int

    @property
    def why(self) -> str:
        return " and ".join(self.changed) + " changed"


class KnowledgeBases:
    def __init__(
        self,
        registry: KBRegistry,
        repo: KBRepository,
        store: KBIndex,
        activity: ActivityLog,
        reindexer: Reindexer,
        events: Events,
        *,
        vet: Callable[[KnowledgeBaseConfig], Awaitable[None]],
        credential_problem: Callable[[str | None], str | None],
    ) -> None:
        self.registry = registry
        self.repo = repo
        self.store = store
        self.activity = activity
        self.reindexer = reindexer
        # FullPassWanted (settings changed), LayoutChanged (a KB's folder came or went)
        self.events = events
        # Refuses settings that cannot work here (a local model that cannot load): handed
        # over by the composition root, so that this service does not depend on embedders.
        self.vet = vet
        self.credential_problem = credential_problem  # why a credential_ref cannot resolve
        self.pending: dict[str, PendingPass] = {}  # KB -> the pass its settings await
        self._changes = 0

    async def _vetted(self, config: KnowledgeBaseConfig) -> KnowledgeBaseConfig:
        await self.vet(config)
        return config

    def list(self) -> list[KnowledgeBase]:
        return self.registry.all()

    def get(self, name: str) -> KnowledgeBase:
        kb = self.registry.get(check_kb_name(name))
        if kb is None:
            raise KBNotFound(name, self.close_names(name))
        return kb

    def close_names(self, name: str) -> Sequence[str]:
        """The knowledge bases whose names are close to `name` (a typo), closest first."""
        names = [kb.name for kb in self.registry.all()]
        return difflib.get_close_matches(name.casefold(), names, n=3, cutoff=0.6)

    def get_enabled(self, name: str) -> KnowledgeBase:
        kb = self.get(name)
        if not kb.enabled:
            raise KBDisabled(name)
        return kb

    async def create(
        self,
        name: str,
        config: dict[str, Any] | None = None,
        *,
        folder: Path | None = None,
        actor: str = "user",
    ) -> KnowledgeBase:
        """A new KB: its own docs folder in the data home, or `folder` attached in place."""
        check_kb_name(name)
        # the settings given over the defaults, as a change would (null: the default)
        parsed = await self._vetted(merge_config(KnowledgeBaseConfig(), config or {}))
        async with self.registry.lock(name):
            if self.registry.get(name) is not None or await self.registry.reload(name):
                raise KBExists(name)
            if folder is not None:
                folder = await asyncio.to_thread(self.repo.check_attachable, folder)
            kb = KnowledgeBase(
                name=name,
                config=parsed,
                enabled=True,
                created_at=utc_now(),
                attached=str(folder) if folder else None,
            )
            await asyncio.to_thread(self._create_folder, kb, folder)
            self.registry.put(kb)
        self.events.publish(LayoutChanged())
        await self.activity.audit("resource_created", actor, name, None, kb.snapshot())
        return kb

    def _create_folder(self, kb: KnowledgeBase, folder: Path | None) -> None:
        if folder is not None:
            self.repo.attach(kb.name, folder)
        else:
            self.repo.create_folders(kb.name)
        self.repo.save(kb)

    async def adopt(self, name: str) -> KnowledgeBase | None:
        """A KB folder that appeared, or changed, without going through `create` (copied,
        synced, its settings edited by hand): read it again. A new folder without a
        settings file gets one, so its settings and creation time stay put."""
        async with self.registry.lock(name):
            kb = await self.registry.reload(name)
            if kb is not None:
                await asyncio.to_thread(self._adopt_folder, kb)
            return kb

    def _adopt_folder(self, kb: KnowledgeBase) -> None:
        self.repo.create_folders(kb.name)
        if not self.repo.has_settings(kb.name):
            self.repo.save(kb)

    async def attach(
        self, name: str, folder: Path | None = None, *, actor: str = "user"
    ) -> KnowledgeBase:
        """Trust a KB's folder on this machine: its docs link came by a sync or a copy, or
        the folder was replaced or moved. `folder`, or where the link leads now; checked as
        when a folder is first attached."""
        kb = self.get(name)
        target = folder or (Path(kb.attached) if kb.attached else None)
        if target is None:
            raise ValidationFailed(
                f"{name!r} keeps its documents in the data home; there is no folder to attach",
                field="path",
            )
        async with self.registry.lock(name):
            real = await asyncio.to_thread(self.repo.check_attachable, target, name)
            await asyncio.to_thread(self.repo.reattach, name, real)
            updated = await self.registry.reload(name)
            if updated is None:
                raise KBNotFound(name)
        self.events.publish(LayoutChanged())
        await self.activity.audit("resource_attached", actor, name, None, {"path": str(real)})
        return updated

    async def _writable(self, name: str) -> KnowledgeBase:
        """The KB as its settings file says now (an edit by hand may not have been seen
        yet), if that file can be rewritten without losing what is in it. The caller holds
        the KB's lock from this read to its write, so no change is lost between them."""
        self.get(name)
        kb = await self.registry.reload(name)
        if kb is None:
            raise KBNotFound(name)
        if kb.settings_error:
            raise ValidationFailed(
                f"the settings file cannot be read ({kb.settings_error}); fix it first, "
                "so that saving does not overwrite it",
                field="kb.yaml",
            )
        return kb

    async def _save(self, kb: KnowledgeBase) -> None:
        """Write the KB's settings (the caller holds its lock)."""
        await asyncio.to_thread(self.repo.save, kb)
        self.registry.put(kb)

    def problems(self, kb: KnowledgeBase) -> tuple[str, ...]:
        """What in a KB's settings keeps part of it from working here."""
        found: tuple[str, ...] = ()
        if kb.settings_error:
            found += (f"its settings file cannot be read: {kb.settings_error}",)
        embedding = kb.config.embedding
        if kb.config.vector_enabled and embedding is not None:
            credential = self.credential_problem(embedding.credential_ref)
            if credential is not None:
                found += (credential,)
        return found

    async def update_config(
        self, name: str, patch: dict[str, Any], *, actor: str = "user"
    ) -> SettingsUpdate:
        """Change settings. A change of chunking, size limit or formats answers at once: the
        pass over every document it needs runs in the background (a pass already running
        stops at its next document and gives way, so the change never waits for it).
        Read, merge and write happen under the KB's lock: two changes at once both land."""
        # Vetting can take a while (a local model is loaded to try it): done before the
        # lock, and again under it only if what it vetted changed meanwhile.
        kb = self.get(name)
        vetted = await self._vetted(merge_config(kb.config, patch))
        if _pass_needed(kb.config, vetted):
            self.reindexer.halt(name)  # a pass holding the lock gives it back at once
        try:
            async with self.registry.lock(name):
                self.reindexer.resume(name)
                kb = await self._writable(name)
                config = merge_config(kb.config, patch)
                if (
                    config.embedding != vetted.embedding
                    or config.vector_enabled != vetted.vector_enabled
                ):
                    config = await self._vetted(config)
                updated = replace(kb, config=config, ignored_settings=())
                await self._save(updated)
                await self.activity.audit(
                    "resource_updated",
                    actor,
                    name,
                    None,
                    {"config": config.model_dump(mode="json")},
                )
                changed = _changed(kb.config, config)
                if config.max_document_bytes != kb.config.max_document_bytes or (
                    config.index_formats != kb.config.index_formats
                ):
                    self.reindexer.forget_skipped(name)
                if changed and updated.enabled:
                    earlier = self.pending.get(name)
                    if earlier is not None:  # its reasons, and the new ones not among them
                        changed = [
                            *earlier.changed,
                            *(c for c in changed if c not in earlier.changed),
                        ]
                    self._changes += 1
                    self.pending[name] = PendingPass(tuple(changed), self._changes)
                    self.events.publish(FullPassWanted(name))
        finally:
            self.reindexer.resume(name)
        warnings = (
            []
            if config.embedding is None
            else [
                problem
                for problem in [self.credential_problem(config.embedding.credential_ref)]
                if problem is not None
            ]
        )
        rechunked = config.chunking_key() != kb.config.chunking_key() and updated.enabled
        pending = self.pending.get(name)
        notices = [] if "embedding" not in patch else vectors_off_notices(name, config)
        return SettingsUpdate(updated, None, rechunked, warnings, pending and pending.why, notices)

    def pass_began(self, name: str) -> int:
        """A pass over every document of `name` begins: the change it settles (0: none)."""
        pending = self.pending.get(name)
        return pending.change if pending else 0

    def pass_ended(self, name: str, change: int) -> None:
        """A pass that began at `change` ended whole: the settings it applied are in force
        (unless a later change asked for another pass)."""
        pending = self.pending.get(name)
        if pending is not None and pending.change <= change:
            del self.pending[name]

    async def set_enabled(
        self, name: str, enabled: bool, *, actor: str = "user"
    ) -> tuple[KnowledgeBase, ReindexResult | None]:
        async with self.registry.lock(name):
            kb = await self._writable(name)
            updated = replace(kb, enabled=enabled, ignored_settings=())
            await self._save(updated)
            await self.activity.audit(
                "resource_enabled" if enabled else "resource_disabled", actor, name, None, {}
            )
            result = None
            if enabled:
                result = await self.reindexer.reconcile_locked(updated, actor=actor)
        return updated, result

    async def delete(self, name: str, *, actor: str = "user") -> KnowledgeBase:
        kb = self.get(name)
        async with self.registry.lock(name):
            await self.store.delete_kb(name)
            await asyncio.to_thread(self.repo.remove, name)
            self.registry.drop(name)
        self.events.publish(LayoutChanged())
        self.reindexer.forget_skipped(name)
        await self.activity.audit("resource_deleted", actor, name, None, kb.snapshot())
        return kb

    async def reindex(self, name: str, *, actor: str = "user") -> ReindexResult:
        return await self.reindexer.reconcile(self.get_enabled(name), actor=actor, audit=True)

    async def metrics(self, name: str) -> dict[str, Any]:
        kb = self.get(name)
        counts = await self.store.metrics(name)
        originals = await asyncio.to_thread(self.repo.originals_bytes, name)
        return {
            **counts,
            "modes": list(kb.config.enabled_modes),
            "default_mode": kb.config.default_mode,
            "disk_bytes": counts["document_bytes"] + originals,
        }

    async def counts(self, name: str) -> dict[str, int]:
        """Document counts only (what `status` shows; no disk walk)."""
        return await self.store.metrics(name)


def _pass_needed(before: KnowledgeBaseConfig, after: KnowledgeBaseConfig) -> bool:
    """Whether going from `before` to `after` needs a pass over every document."""
    return bool(_changed(before, after))


def _changed(before: KnowledgeBaseConfig, after: KnowledgeBaseConfig) -> list[str]:
    """What changed from `before` to `after` that needs a pass over every document."""
    return [
        what
        for what, differs in (
            ("chunking", before.chunking_key() != after.chunking_key()),
            ("size limit", before.max_document_bytes != after.max_document_bytes),
            ("formats", before.index_formats != after.index_formats),
        )
        if differs
    ]


def vectors_off_notices(name: str, config: KnowledgeBaseConfig) -> list[dict[str, str]]:
    """Embedding settings saved in a KB without vector search do nothing until vector mode
    is on and this machine chooses a provider: what to set, and the command that sets it."""
    embedding = config.embedding
    if config.vector_enabled or embedding is None:
        return []
    missing, settings = [], []
    if "vector" not in config.enabled_modes:
        missing.append("vector mode is off")
        modes = [
            *config.enabled_modes,
            *(m for m in ("vector", "hybrid") if m not in config.enabled_modes),
        ]
        settings.append(f"enabled_modes={','.join(modes)}")
    if embedding.provider is None:
        missing.append("no embedding provider is chosen on this machine")
        local = embedding.model in BUNDLED_MODELS or embedding.model_path
        settings.append(f"embedding.provider={'local' if local else '<provider>'}")
    command = f"cofferctl kb set {name} {' '.join(settings)}"
    message = (
        f"{name} has no vector search ({' and '.join(missing)}): its embedding settings are "
        "saved, and take effect once vector search is on"
    )
    return [{"code": "vector_search_off", "message": message, "command": command}]
