"""Knowledge bases: create, list, get, configure, enable/disable, delete (with cascade)."""

from __future__ import annotations

import asyncio
from typing import Any

from cofferd.application.locks import KBLocks
from cofferd.application.reindexer import Reindexer
from cofferd.domain.config import check_kb_name, merge_config, parse_config
from cofferd.domain.errors import KBDisabled, KBExists, KBNotFound, ValidationFailed
from cofferd.domain.models import KnowledgeBase, ReindexResult, utc_now
from cofferd.domain.ports import IndexStore, KBRepository

DEFAULT_KB = "notes"


class KnowledgeBases:
    def __init__(
        self, repo: KBRepository, store: IndexStore, reindexer: Reindexer, locks: KBLocks
    ) -> None:
        self.repo = repo
        self.store = store
        self.reindexer = reindexer
        self.locks = locks

    def list(self) -> list[KnowledgeBase]:
        return [kb for name in self.repo.names() if (kb := self.repo.load(name)) is not None]

    def get(self, name: str) -> KnowledgeBase:
        kb = self.repo.load(check_kb_name(name))
        if kb is None:
            raise KBNotFound(name)
        return kb

    def get_enabled(self, name: str) -> KnowledgeBase:
        kb = self.get(name)
        if not kb.enabled:
            raise KBDisabled(name)
        return kb

    async def create(
        self, name: str, config: dict[str, Any] | None = None, *, actor: str = "user"
    ) -> KnowledgeBase:
        check_kb_name(name)
        parsed = parse_config(config or {})
        async with self.locks(name):
            if self.repo.load(name) is not None:
                raise KBExists(name)
            kb = KnowledgeBase(name=name, config=parsed, enabled=True, created_at=utc_now())
            self.repo.create_folders(name)
            self.repo.save(kb)
        await self.store.audit("resource_created", actor, name, None, kb.snapshot())
        return kb

    async def adopt(self, name: str) -> KnowledgeBase:
        """A KB folder that appeared without going through `create` (copied, synced)."""
        kb = self.get(name)
        self.repo.create_folders(name)
        if not self.repo.has_settings(name):
            self.repo.save(kb)  # its settings and creation time now stay put
        return kb

    def _writable(self, name: str) -> KnowledgeBase:
        """The KB, if its settings file can be rewritten without losing what is in it."""
        kb = self.get(name)
        if kb.settings_error:
            raise ValidationFailed(
                f"the settings file cannot be read ({kb.settings_error}); fix it first, "
                "so that saving does not overwrite it",
                field="kb.yaml",
            )
        return kb

    async def update_config(
        self, name: str, patch: dict[str, Any], *, actor: str = "user"
    ) -> tuple[KnowledgeBase, ReindexResult | None]:
        """Change settings; a chunking or size-limit change reconciles before returning."""
        kb = self._writable(name)
        config = merge_config(kb.config, patch)
        updated = KnowledgeBase(kb.name, config, kb.enabled, kb.created_at)
        async with self.locks(name):
            self.repo.save(updated)
        await self.store.audit(
            "resource_updated", actor, name, None, {"config": config.model_dump(mode="json")}
        )
        result = None
        limit_changed = config.max_document_bytes != kb.config.max_document_bytes
        if limit_changed:
            self.reindexer.forget_skipped(name)
        if updated.enabled and (config.chunking_key() != kb.config.chunking_key() or limit_changed):
            result = await self.reindexer.reconcile(updated, actor=actor)
        return updated, result

    async def set_enabled(
        self, name: str, enabled: bool, *, actor: str = "user"
    ) -> tuple[KnowledgeBase, ReindexResult | None]:
        kb = self._writable(name)
        updated = KnowledgeBase(kb.name, kb.config, enabled, kb.created_at)
        async with self.locks(name):
            self.repo.save(updated)
        await self.store.audit(
            "resource_enabled" if enabled else "resource_disabled", actor, name, None, {}
        )
        result = await self.reindexer.reconcile(updated, actor=actor) if enabled else None
        return updated, result

    async def delete(self, name: str, *, actor: str = "user") -> KnowledgeBase:
        kb = self.get(name)
        async with self.locks(name):
            await self.store.delete_kb(name)
            await asyncio.to_thread(self.repo.remove, name)
        await self.store.audit("resource_deleted", actor, name, None, kb.snapshot())
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
