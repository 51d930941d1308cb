"""Converted documents kept current with their originals: convert the kept original again
(reconvert), ingest the tracked source file again (update-source), and compare every
tracked source with what was converted (check-sources). Never over a document edited
since it was converted."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cofferd.application.documents.ingest import Ingest, IngestResult, sha256_file
from cofferd.application.documents.source_paths import check_source
from cofferd.application.reading import markdown
from cofferd.domain.errors import PathRefused, ReconversionBlocked, SourceMissing, ValidationFailed
from cofferd.domain.models import Document, KnowledgeBase


@dataclass
class SourceCheck:
    unchanged: list[dict[str, Any]] = field(default_factory=list)
    changed: list[dict[str, Any]] = field(default_factory=list)
    missing: list[dict[str, Any]] = field(default_factory=list)
    updated: list[dict[str, Any]] = field(default_factory=list)
    unreachable: list[dict[str, Any]] = field(default_factory=list)  # the daemon cannot look

    def as_dict(self) -> dict[str, Any]:
        return {
            "unchanged": self.unchanged,
            "changed": self.changed,
            "missing": self.missing,
            "updated": self.updated,
            "unreachable": self.unreachable,
        }


class Originals:
    def __init__(self, ingest: Ingest) -> None:
        self.ingest = ingest

    async def _converted(self, kb_name: str, doc_id: str) -> tuple[KnowledgeBase, Document]:
        kb = self.ingest.kbs.get_enabled(kb_name)
        doc = (
            await self.ingest.documents.get(
                kb_name, (await self.ingest.documents.exact(kb_name, doc_id)).id
            )
        ).document
        if "source_sha256" not in doc.metadata:
            raise ValidationFailed(f"{doc.title!r} was not converted from another file")
        if await self._edited(kb, doc):
            raise ReconversionBlocked(
                f"{doc.title!r} was edited since it was converted; converting again would "
                "overwrite those edits",
                document_id=doc.id,
            )
        return kb, doc

    async def _edited(self, kb: KnowledgeBase, doc: Document) -> bool:
        """Edited, judged from the file as it is now: a save the watcher has not indexed
        yet must not be converted over."""
        if doc.source_mode == "edited":
            return True
        return await asyncio.to_thread(self._edited_on_disk, kb.name, doc.path)

    def _edited_on_disk(self, kb: str, relpath: str) -> bool:
        content = self.ingest.tree.read(kb, relpath)
        if content is None:
            return False
        try:
            return markdown.parse(content.data, relpath).source_mode == "edited"
        except markdown.NotText:
            return True  # not what Coffer wrote: leave it alone

    async def reconvert(self, kb_name: str, doc_id: str, *, actor: str) -> IngestResult:
        """Convert the kept original again (after a converter upgrade, say)."""
        kb, doc = await self._converted(kb_name, doc_id)
        original = self.ingest.tree.original(kb.name, doc.id)
        if original is None:
            raise SourceMissing(f"the original of {doc.title!r} is not in raw/")
        filename = str(doc.metadata.get("original_filename") or original.name)
        converted = await self.ingest._to_markdown(original, filename)
        # only this machine's own tracking, never a source_path read from frontmatter
        tracked = (await self.ingest.tracked.tracked_sources(kb.name)).get(doc.id)
        digest = str(doc.metadata["source_sha256"])
        async with self.ingest.kbs.registry.lock(kb.name):
            return await self.ingest._write(
                kb, original, filename, digest, doc, tracked, converted, actor
            )

    async def update_source(self, kb_name: str, doc_id: str, *, actor: str) -> IngestResult:
        """Ingest the tracked file at `source_path` again, in place."""
        kb, doc = await self._converted(kb_name, doc_id)
        source_path = (await self.ingest.tracked.tracked_sources(kb.name)).get(doc.id)
        if not source_path:
            raise ValidationFailed(f"{doc.title!r} does not track a source file on this machine")
        try:  # the path is checked again at every read: a link may have been swapped in
            source = self._tracked_source(source_path)
        except ValidationFailed:
            raise SourceMissing(
                f"the source {source_path} is gone", source_path=source_path
            ) from None
        filename = str(doc.metadata.get("original_filename") or source.name)
        await self.ingest._check_file(kb, source, filename)
        digest = await asyncio.to_thread(sha256_file, source)
        if digest == doc.metadata.get("source_sha256"):
            view = await self.ingest.documents.get(kb.name, doc.id)
            return IngestResult("unchanged", view, "the source has not changed")
        converted = await self.ingest._to_markdown(source, filename)
        async with self.ingest.kbs.registry.lock(kb.name):
            return await self.ingest._write(
                kb, source, filename, digest, doc, source_path, converted, actor
            )

    def _tracked_source(self, source_path: str) -> Path:
        """A tracked source, checked as when it was added (as the user's)."""
        return check_source(
            source_path,
            actor=None,
            agent_roots=self.ingest.agent_roots,
            data_home=self.ingest.data_home,
        )

    async def check_sources(self, kb_name: str, *, actor: str) -> SourceCheck:
        kb = self.ingest.kbs.get_enabled(kb_name)
        report = SourceCheck()
        tracked = await self.ingest.tracked.tracked_sources(kb.name)
        for doc in await self.ingest.store.find_by_metadata(kb.name, "source_path"):
            if doc.id not in tracked:
                continue  # added elsewhere (a synced KB): its source_path is not ours to read
            path = Path(tracked[doc.id])
            entry = {"document_id": doc.id, "title": doc.title, "source_path": str(path)}
            hidden = next((f for f in self.ingest.private_folders if path.is_relative_to(f)), None)
            if hidden is not None:
                report.unreachable.append(
                    {**entry, "note": f"cofferd has a private {hidden} (a service sandbox) and "
                     "cannot see it; `cofferctl add` it again to refresh it"}
                )  # fmt: skip
                continue
            try:
                self._tracked_source(str(path))
            except PathRefused as exc:
                report.unreachable.append({**entry, "note": f"not read: {exc.message}"})
                continue
            except ValidationFailed:
                pass  # not a file (any more): told apart below
            try:
                path.stat()
            except PermissionError:
                report.unreachable.append({**entry, "note": "cofferd may not read it"})
                continue
            except OSError:
                report.missing.append(entry)
                continue
            if not path.is_file():
                report.missing.append(entry)
                continue
            if await asyncio.to_thread(sha256_file, path) == doc.metadata.get("source_sha256"):
                report.unchanged.append(entry)
                continue
            if await self._edited(kb, doc):
                report.changed.append({**entry, "note": "edited in Coffer; not updated"})
            elif kb.config.auto_update_sources:
                await self.update_source(kb.name, doc.id, actor=actor)
                report.updated.append(entry)
            else:
                report.changed.append(entry)
        counts = {key: len(value) for key, value in report.as_dict().items()}
        await self.ingest.kbs.activity.audit("kb_sources_checked", actor, kb.name, None, counts)
        return report
