"""Any document in, a Markdown document out: conversion, provenance and re-upload. Keeping
a converted document current with its original (reconvert, update-source, check-sources)
is `originals`. Every path ends in the Reindexer."""

from __future__ import annotations

import asyncio
import errno
import hashlib
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any, Literal

from coffer_kernel.markdown_grammar import first_heading
from cofferd.application.documents.documents import Documents, DocumentView, remove_files
from cofferd.application.documents.source_paths import check_source
from cofferd.application.documents.title_convention import titled, uses_frontmatter_titles
from cofferd.application.indexing.knowledge_bases import KnowledgeBases
from cofferd.application.indexing.reindexer import Reindexer
from cofferd.application.reading import markdown
from cofferd.application.reading.converted_titles import converted_title
from cofferd.domain.errors import (
    IngestRejected,
    ValidationFailed,
)
from cofferd.domain.failures import ConversionFailed
from cofferd.domain.file_names import UNTITLED, file_stem, folder_in_kb
from cofferd.domain.index_records import Converted
from cofferd.domain.models import Document, KnowledgeBase, ReindexResult, utc_now
from cofferd.domain.ports import (
    DocsTree,
    DocumentCatalog,
    DocumentFormats,
    MarkdownConverter,
    TrackedSources,
)

Status = Literal["added", "updated", "unchanged"]


@dataclass(frozen=True)
class IngestResult:
    status: Status
    document: DocumentView
    message: str


@dataclass(frozen=True)
class _Original:
    """A file being converted: where its bytes are, its name and its format."""

    path: Path
    filename: str
    format: str


def sha256_file(path: Path) -> str:
    """The digest of a regular file, read without following a link (OSError otherwise)."""
    digest = hashlib.sha256()
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        while block := fh.read(1024 * 1024):
            digest.update(block)
    return digest.hexdigest()


class Ingest:
    def __init__(
        self,
        kbs: KnowledgeBases,
        store: DocumentCatalog,
        tracked: TrackedSources,
        tree: DocsTree,
        reindexer: Reindexer,
        documents: Documents,
        converter: MarkdownConverter,
        formats: DocumentFormats,
        *,
        data_home: Path,
        agent_roots: Sequence[Path] = (),
        private_folders: Sequence[Path] = (),
    ) -> None:
        self.kbs = kbs
        self.store = store
        self.tracked = tracked
        self.tree = tree
        self.reindexer = reindexer
        self.documents = documents
        self.converter = converter
        self.formats = formats
        self.data_home = data_home
        self.agent_roots = tuple(agent_roots)
        self.private_folders = tuple(private_folders)  # what the user sees there, we do not

    # -- adding -------------------------------------------------------------------------

    async def add_path(
        self,
        kb_name: str,
        given: str,
        *,
        replace: bool,
        track: bool,
        actor: str,
        folder: str | None = None,
    ) -> IngestResult:
        """Add a file on this machine by its path (see source_paths for which may be);
        tracked for check-sources unless `track` is false."""
        source = check_source(
            given, actor=actor, agent_roots=self.agent_roots, data_home=self.data_home
        )
        return await self.add_file(
            kb_name,
            source,
            source.name,
            replace=replace,
            source_path=str(source) if track else None,
            actor=actor,
            folder=folder,
        )

    async def add_file(
        self,
        kb_name: str,
        source: Path,
        filename: str,
        *,
        replace: bool = False,
        source_path: str | None = None,
        actor: str = "user",
        folder: str | None = None,
    ) -> IngestResult:
        """Convert and add one file (a temporary upload, or the user's own file when
        `source_path` tracks it). A new document goes into `folder` of the KB (None: its
        `add_folder`), named after its title."""
        kb = self.kbs.get_enabled(kb_name)
        into = self._folder(kb, folder)
        filename = PurePath(filename).name or "document"
        if source_path is not None:
            await self._check_not_indexed_there(kb, Path(source_path), filename)
        await self._check_file(kb, source, filename)
        digest = await asyncio.to_thread(sha256_file, source)
        known = await self._match(kb, filename, digest, replace, source_path)
        if isinstance(known, IngestResult):
            return known
        converted = await self._to_markdown(source, filename)  # slow: outside the lock
        async with self.kbs.registry.lock(kb.name):
            known = await self._match(kb, filename, digest, replace, source_path)
            if isinstance(known, IngestResult):
                return known
            return await self._write(
                kb, source, filename, digest, known, source_path, converted, actor, into
            )

    async def _check_not_indexed_there(self, kb: KnowledgeBase, path: Path, filename: str) -> None:
        """A file in the KB's own folder that is a document there already (a note, or a
        PDF indexed where it lies) would be found twice once added."""
        relpath = await asyncio.to_thread(self.tree.within, kb.name, path)
        if relpath and await asyncio.to_thread(self.tree.stat, kb.name, relpath) is not None:
            raise IngestRejected(
                "already_indexed",
                f"{filename!r} lies in this knowledge base's folder ({relpath}) and is "
                "indexed there already",
                relative_path=relpath,
            )

    @staticmethod
    def _folder(kb: KnowledgeBase, given: str | None) -> str:
        """The folder a new document of the KB goes into: the one asked for, else the KB's
        `add_folder`."""
        try:
            return folder_in_kb(kb.config.add_folder if given is None else given)
        except ValueError as exc:
            raise ValidationFailed(f"folder {exc}", field="folder") from None

    async def _match(
        self, kb: KnowledgeBase, filename: str, digest: str, replace: bool, source_path: str | None
    ) -> IngestResult | Document | None:
        """What adding this file means: nothing (the same bytes are already here), an update
        of a document of the same name (with `replace`), or a new document (None)."""
        same_bytes = await self.store.find_by_metadata(kb.name, "source_sha256", digest)
        for doc in same_bytes:
            if doc.metadata.get("original_filename") == filename:
                view = await self.documents.get(kb.name, doc.id)
                return IngestResult("unchanged", view, "identical to the stored original")
        if same_bytes:
            doc = same_bytes[0]
            raise IngestRejected(
                "duplicate",
                f"the same file is already in {kb.name!r} as {doc.title!r}",
                document_id=doc.id,
                title=doc.title,
            )
        named = [
            doc
            for doc in await self.store.find_by_metadata(kb.name, "original_filename", filename)
            # a tracked file is the same document only if it is the same file
            if not source_path or doc.metadata.get("source_path") in (None, source_path)
        ]
        if named and not replace:
            raise IngestRejected(
                "duplicate",
                f"{filename!r} is already in {kb.name!r}; pass replace to update it",
                document_id=named[0].id,
                title=named[0].title,
            )
        return named[0] if named else None

    async def add_markdown(
        self,
        kb_name: str,
        content: str,
        title: str | None,
        *,
        actor: str,
        folder: str | None = None,
    ) -> IngestResult:
        """A new document written directly in Markdown (an agent's notes, say), in
        `folder` of the KB (None: its `add_folder`), named after its title."""
        kb = self.kbs.get_enabled(kb_name)
        into = self._folder(kb, folder)
        if not content.strip():
            raise IngestRejected("empty", "the document is empty")
        if len(content.encode()) > kb.config.max_document_bytes:
            raise IngestRejected("too_large", "the document is larger than max_document_bytes")
        frontmatter_titles = await uses_frontmatter_titles(self.store, self.tree, kb.name)
        text, name = await asyncio.to_thread(titled, content, title, frontmatter_titles)
        name = name or UNTITLED
        async with self.kbs.registry.lock(kb.name):
            relpath = await self._create(kb, into, name, text)
            doc_id = await self._id_of(kb, relpath)
            await self._index_new(kb, relpath, doc_id, actor)
        return IngestResult("added", await self.documents.get(kb.name, doc_id), "added")

    async def _create(self, kb: KnowledgeBase, folder: str, title: str, text: str) -> str:
        """Write a new document named after its title; its path."""
        return await asyncio.to_thread(
            self.tree.create, kb.name, folder, file_stem(title), text.encode()
        )

    async def _id_of(self, kb: KnowledgeBase, relpath: str) -> str:
        """The id the index gives the file at `relpath` (derived from the path)."""
        known = await self.store.document_ids(kb.name, [relpath])
        return known.get(relpath) or markdown.document_id(relpath)

    async def _index_new(
        self, kb: KnowledgeBase, relpath: str, doc_id: str, actor: str
    ) -> ReindexResult:
        """Index a document this request has just written; when that fails, its files go
        again: the caller is told it failed, so nothing of it may stay behind."""
        try:
            return await self.reindexer.sync_paths_locked(kb, [relpath], actor=actor)
        except Exception:
            await asyncio.to_thread(remove_files, self.tree, kb.name, relpath, doc_id)
            raise

    async def _check_file(self, kb: KnowledgeBase, source: Path, filename: str) -> None:
        await asyncio.to_thread(self._check_source, kb, source, filename)  # it may be remote

    def _check_source(self, kb: KnowledgeBase, source: Path, filename: str) -> None:
        if not source.is_file():
            raise ValidationFailed(f"{source} is not a file", field="path")
        size = source.stat().st_size
        if size == 0:
            raise IngestRejected("empty", f"{filename!r} is empty")
        if size > kb.config.max_document_bytes:
            raise IngestRejected(
                "too_large",
                f"{filename!r} is {size:,} bytes; this knowledge base takes at most "
                f"{kb.config.max_document_bytes:,}",
                limit=kb.config.max_document_bytes,
            )
        fmt = self.formats.file_format(filename)
        if fmt not in self.formats.supported_formats():
            raise IngestRejected(
                "unsupported_type",
                f"{filename!r}: .{fmt or '?'} files are not supported",
                supported=self.formats.supported_formats(),
            )

    async def _write(
        self,
        kb: KnowledgeBase,
        source: Path,
        filename: str,
        digest: str,
        target: Document | None,
        source_path: str | None,
        converted: tuple[dict[str, Any], str],
        actor: str,
        folder: str = "",
    ) -> IngestResult:
        """Keep the original, write the Markdown and index it (the caller holds the lock):
        over the document's own file for `target`, else as a new file in `folder`."""
        fmt = self.formats.file_format(filename)
        frontmatter, body = converted
        passthrough = self.formats.is_passthrough(fmt)
        frontmatter.update(
            {
                "source_filename": filename,
                "source_format": fmt,
                "source_sha256": digest,
                "converter": "passthrough" if passthrough else self.converter.engine,
                "converted_at": utc_now(),
                "source_mode": "converted",
            }
        )
        if source_path:
            frontmatter["source_path"] = source_path
        text = await asyncio.to_thread(_with_provenance, frontmatter, body)
        if target:
            doc_id = target.id
            await asyncio.to_thread(self.tree.keep_original, kb.name, doc_id, fmt, source)
            await asyncio.to_thread(self.tree.write, kb.name, target.path, text.encode())
            await self.reindexer.sync_paths_locked(kb, [target.path], actor=actor)
        else:
            original = _Original(source, filename, fmt)
            title = str(frontmatter["title"])
            doc_id = await self._write_new(kb, folder, title, text, original, actor)
        if source_path:
            await self.tracked.track_source(kb.name, doc_id, source_path)
        view = await self.documents.get(kb.name, doc_id)
        if target:
            return IngestResult("updated", view, f"updated {view.document.title!r} in place")
        return IngestResult("added", view, f"added {view.document.title!r}")

    async def _write_new(
        self,
        kb: KnowledgeBase,
        folder: str,
        title: str,
        text: str,
        original: _Original,
        actor: str,
    ) -> str:
        """A new converted document: its Markdown file named after its title, its original
        kept, indexed; its id. Nothing of it stays when any step fails."""
        relpath = await self._create(kb, folder, title, text)
        doc_id = await self._id_of(kb, relpath)
        try:
            await asyncio.to_thread(
                self.tree.keep_original, kb.name, doc_id, original.format, original.path
            )
        except BaseException:
            await asyncio.to_thread(self.tree.remove, kb.name, relpath)
            raise
        result = await self._index_new(kb, relpath, doc_id, actor)
        if result.skipped:
            await asyncio.to_thread(remove_files, self.tree, kb.name, relpath, doc_id)
            reason = result.skipped[0]["reason"]
            raise IngestRejected(
                "too_large" if reason == "too_large" else "conversion_failed",
                f"{original.filename!r} converted to Markdown that cannot be indexed: {reason}",
            )
        return doc_id

    async def _to_markdown(self, source: Path, filename: str) -> tuple[dict[str, Any], str]:
        """(frontmatter, body) of the converted document, its title set."""
        fmt = self.formats.file_format(filename)
        if self.formats.is_passthrough(fmt):
            try:
                return await asyncio.to_thread(_passthrough, source, filename)
            except markdown.NotText as exc:
                raise IngestRejected("conversion_failed", f"{filename!r}: {exc}") from None
        try:
            converted = await self.converter.convert(source, fmt)
        except ConversionFailed as exc:
            raise IngestRejected(
                "conversion_failed", f"{filename!r} could not be converted: {exc}"
            ) from None
        return await asyncio.to_thread(_titled_conversion, converted, filename)


# What follows parses or writes YAML and Markdown of any size: it runs in threads.


def _with_provenance(frontmatter: dict[str, Any], body: str) -> str:
    return markdown.compose({**frontmatter, "body_sha256": markdown.body_hash(body)}, body)


def _passthrough(source: Path, filename: str) -> tuple[dict[str, Any], str]:
    text, _ = markdown.decode(source.read_bytes())
    frontmatter, body, _ = markdown.split_frontmatter(text)
    title = frontmatter.get("title") or first_heading(body)
    return {**frontmatter, "title": str(title or PurePath(filename).stem)}, body


def _titled_conversion(converted: Converted, filename: str) -> tuple[dict[str, Any], str]:
    """The note made of a converted file: its text (pages marked) under its title; the
    frontmatter the converter wrote for a text kept in the data home is not the note's."""
    _, body, _ = markdown.split_frontmatter(converted.markdown)
    body = body.strip("\n") + "\n"
    return {"title": converted_title(converted.title, body, filename)}, body
