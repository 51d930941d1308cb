"""Documents of a knowledge base: list, read and edit, all through the Reindexer (deleting
moves a document to the trash: application/trash.py)."""

from __future__ import annotations

import asyncio
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from coffer_kernel.bounds import LIST_LIMIT_MAX
from coffer_kernel.locations import normalize_relpath
from coffer_kernel.markdown_grammar import MARKDOWN_SUFFIXES
from cofferd.application.documents import references
from cofferd.application.documents.title_convention import (
    uses_frontmatter_titles,
    without_doubled_title,
)
from cofferd.application.indexing.knowledge_bases import KnowledgeBases
from cofferd.application.indexing.reindexer import Reindexer
from cofferd.application.reading import markdown
from cofferd.domain.errors import (
    DocumentAmbiguous,
    DocumentChanged,
    DocumentNotFound,
    DocumentReadOnly,
    PayloadTooLarge,
    ValidationFailed,
)
from cofferd.domain.formats import (
    MARKDOWN,
    TEXT_FORMATS,
    format_of,
    is_converted,
)
from cofferd.domain.models import Document
from cofferd.domain.ports import DerivedTextStore, DocsTree, DocumentCatalog

AMBIGUOUS_SHOWN = 10  # documents named when a reference fits several
ID_PREFIX_MIN_CHARS = 4  # a shorter start of an id (a document's, a trash entry's) names none


@dataclass(frozen=True)
class DocumentView:
    document: Document
    path: str
    folder_path: str
    body: str | None = None
    frontmatter: dict[str, Any] | None = None
    file_text: str | None = None  # the whole file, frontmatter included (asked for)
    derived: bool = False  # the text is converted from the file (a PDF...), kept apart


class Documents:
    def __init__(
        self,
        kbs: KnowledgeBases,
        store: DocumentCatalog,
        tree: DocsTree,
        reindexer: Reindexer,
        texts: DerivedTextStore,
    ) -> None:
        self.kbs = kbs
        self.store = store
        self.tree = tree
        self.reindexer = reindexer
        self.texts = texts

    async def _views(self, docs: Sequence[Document]) -> list[DocumentView]:
        """Documents with where they are on disk (looked up off the serving loop)."""
        if not docs:
            return []
        where = await places(self.tree, docs[0].resource_name, [d.path for d in docs])
        return [DocumentView(d, where[d.path], posixpath.dirname(where[d.path])) for d in docs]

    async def list(
        self, kb: str, *, q: str | None = None, limit: int = 50, offset: int = 0
    ) -> tuple[list[DocumentView], int]:
        self.kbs.get(kb)
        _check_page(limit, offset)
        docs, total = await self.store.list_documents(kb, q=q or None, limit=limit, offset=offset)
        return await self._views(docs), total

    async def find(self, kb: str, ref: str) -> Document:
        """The document `ref` names: its id, its path in the KB (`notes/2024/plan.md`), a
        prefix of its id that no other document's id starts with, or else a name people
        use (application/references: the path without `.md`, its end, the title). Names
        nothing: DocumentNotFound with the documents of close names. For reading: what
        changes a file takes `exact`."""
        self.kbs.get(kb)
        if not ref or "\0" in ref:
            raise DocumentNotFound(kb, ref)
        ref = normalize_relpath(ref)
        found = await self.store.find_documents(kb, ref)
        if len(found) == 1 and (
            found[0].id == ref or found[0].path == ref or len(ref) >= ID_PREFIX_MIN_CHARS
        ):
            return found[0]
        if len(found) > 1:
            listed = references.listed([(d.id, d.path) for d in found])
            raise DocumentAmbiguous(
                f"{ref!r} is the start of several document ids: {listed}; give more of it",
                id=ref,
                candidates=[{"id": d.id, "relative_path": d.path} for d in found],
            )
        return await self._find_by_name(kb, ref)

    async def exact(self, kb: str, ref: str) -> Document:
        """The document whose id or relative path is exactly `ref`: what a write, a move or
        a delete takes, so that no loose match (another case, no suffix, a title) ever
        changes a file that was not named. A loose match is named in the error instead."""
        try:
            doc = await self.find(kb, ref)
        except DocumentAmbiguous:
            raise DocumentNotFound(kb, ref) from None
        if normalize_relpath(ref) in (doc.id, doc.path):
            return doc
        raise DocumentNotFound(kb, ref, references.described([(doc.id, doc.path, doc.title)]))

    async def _find_by_name(self, kb: str, ref: str) -> Document:
        """The document `ref` names as people name one (application/references), looked
        for from the cheapest way to the dearest: the path with `.md` added; the few
        documents whose path holds the reference's last part or whose title it is (SQL,
        any ASCII case: enough for a reference in ASCII); every document. None: the
        documents of close names, suggested."""
        for path in (ref + suffix for suffix in MARKDOWN_SUFFIXES):
            found = await self.store.find_documents(kb, path)
            if len(found) == 1 and found[0].path == path:
                return found[0]
        matches: list[references.Name] = []
        if ref.isascii():
            few = await self.store.document_names(kb, like=references.last_part(ref))
            matches = references.named(few, ref)
        names: list[references.Name] = []
        if not matches:
            names = await self.store.document_names(kb)
            matches = await asyncio.to_thread(references.named, names, ref)  # CPU over all
        if not matches:  # a title two converted documents gave themselves: each by its heading
            matches = sorted(await self.store.set_aside_titles(kb, ref), key=lambda n: n[1])
        if len(matches) > 1:
            shown = matches[:AMBIGUOUS_SHOWN]
            listed = references.listed([(path, title) for _, path, title in shown])
            raise DocumentAmbiguous(
                f"{ref!r} names {len(matches)} documents: {listed}; give its path",
                id=ref,
                candidates=references.described(shown),
            )
        found = await self.store.find_documents(kb, matches[0][0]) if matches else []
        if not found:
            near = await asyncio.to_thread(references.near, names, ref)
            raise DocumentNotFound(kb, ref, references.described(near))
        return found[0]

    async def get(self, kb: str, doc_id: str, *, file_text: bool = False) -> DocumentView:
        """The document with its body and frontmatter as the file says now (for a file in
        another format, as its converted text says: `derived`); `file_text`: with the whole
        text too."""
        doc = await self.find(kb, doc_id)
        # YAML, decoding: off the loop
        read = await asyncio.to_thread(self._read, kb, doc, file_text)
        if read is None:
            raise DocumentNotFound(kb, doc.id)
        path, body, frontmatter, text = read
        derived = is_converted(doc.path)
        return DocumentView(doc, path, posixpath.dirname(path), body, frontmatter, text, derived)

    async def original_file(self, kb: str, doc: Document) -> bytes:
        """The bytes of a document's own file (a PDF, for a viewer), read through the KB's
        boundary as every read is."""
        content = await asyncio.to_thread(self.tree.read, kb, doc.path)
        if content is None:
            raise DocumentNotFound(kb, doc.id)
        return content.data

    async def other_file(self, kb: str, relpath: str) -> bytes:
        """The bytes of a file of the KB that is not a document (an image a note embeds),
        one its scan lists, read through the KB's boundary as every read is."""
        self.kbs.get(kb)
        if relpath not in self.reindexer.other_files.of(kb).paths:
            raise DocumentNotFound(kb, relpath)
        content = await asyncio.to_thread(self.tree.read, kb, relpath)
        if content is None:
            raise DocumentNotFound(kb, relpath)
        return content.data

    def _read(
        self, kb: str, doc: Document, file_text: bool
    ) -> tuple[str, str, dict[str, Any], str | None] | None:
        """(where it is, its body, its frontmatter, its whole text if asked) as the file
        says now, or the text converted from it."""
        if is_converted(doc.path):
            limit = self.reindexer.settings(self.kbs.get(kb)).max_markdown_bytes
            converted = self.texts.text(kb, doc.content_sha256, limit)
            if converted is None:
                return None  # its text went missing: the next full pass converts it again
            data = converted.encode()
        else:
            content = self.tree.read(kb, doc.path)
            if content is None:
                return None
            data = content.data
        try:
            text, _ = markdown.decode(data)
        except markdown.NotText:
            return None  # not a document any more
        frontmatter: dict[str, Any]
        if format_of(doc.path) in TEXT_FORMATS:
            frontmatter, body = {}, text  # plain text: all of it is the body
        else:
            frontmatter, body, _ = markdown.split_frontmatter(text)
        written = _as_written(data) if file_text else None
        return self.tree.absolute(kb, doc.path), body, _jsonable(frontmatter), written

    async def edit(
        self,
        kb_name: str,
        doc_id: str,
        body: str,
        *,
        actor: str,
        expected_sha256: str | None = None,
    ) -> DocumentView:
        """Replace the Markdown: a body alone keeps the file's frontmatter; text that starts
        with frontmatter replaces the whole file. A converted document becomes `edited`.
        The version check, the write and the reindex happen under the KB's lock."""
        kb = self.kbs.get_enabled(kb_name)
        doc = await self.exact(kb_name, doc_id)
        if format_of(doc.path) != MARKDOWN:
            raise DocumentReadOnly(
                f"{doc.path} is not a Markdown file: Coffer indexes it where it lies and never "
                "writes it; edit it in its own application",
                id=doc.id,
            )
        if len(body.encode()) > kb.config.max_document_bytes:
            raise PayloadTooLarge(
                "document is larger than this knowledge base's max_document_bytes",
                limit=kb.config.max_document_bytes,
            )
        async with self.kbs.registry.lock(kb_name):
            current = await asyncio.to_thread(self.tree.read, kb_name, doc.path)
            if current is None:
                raise DocumentNotFound(kb_name, doc.id)
            if expected_sha256 and current.digest != expected_sha256:
                raise DocumentChanged(
                    "the document changed since it was read; read it again and redo the edit",
                    id=doc.id,
                )
            frontmatter_titles = await uses_frontmatter_titles(self.store, self.tree, kb_name)
            await asyncio.to_thread(
                self._write_edited, kb_name, doc.path, current.data, body, frontmatter_titles
            )
            await self.reindexer.sync_paths_locked(kb, [doc.path], actor=actor)
        return await self.get(kb_name, doc.id)

    def _write_edited(
        self, kb: str, relpath: str, current: bytes, body: str, frontmatter_titles: bool
    ) -> None:
        text = without_doubled_title(_edited_text(current, body), frontmatter_titles)
        self.tree.write(kb, relpath, text.encode())

    async def conflict_count(self, kb: str) -> int:
        return len(self.reindexer.conflicts(kb)) + len(await self.store.merge_conflicts(kb))

    async def conflicts(
        self, kb: str, *, limit: int = LIST_LIMIT_MAX, offset: int = 0
    ) -> tuple[Sequence[dict[str, Any]], int]:
        """A page of the sync tools' conflict copies (never indexed) with the document each
        copies, then of the documents that hold git's merge markers; and how many there are
        in all. Only the page's are looked up (a badly synced vault has thousands)."""
        self.kbs.get(kb)
        _check_page(limit, offset)
        every = sorted(self.reindexer.conflicts(kb).items())
        merged_all = await self.store.merge_conflicts(kb)
        total = len(every) + len(merged_all)
        copies = every[offset : offset + limit]
        merged = merged_all[max(0, offset - len(every)) : max(0, offset + limit - len(every))]
        where = await places(self.tree, kb, [p for p, _ in copies] + [d.path for d in merged])
        found = []
        for relpath, copy in copies:
            originals = await self.store.find_documents(kb, copy.original)
            original = next((d for d in originals if d.path == copy.original), None)
            found.append(
                {"kind": "sync_copy", "tool": copy.tool, **place(where, relpath),
                 "conflicts_with": copy.original, "document_id": original.id if original else None}
            )  # fmt: skip
        for doc in merged:
            found.append(
                {"kind": "merge_markers", "tool": "git", **place(where, doc.path),
                 "conflicts_with": doc.path, "document_id": doc.id}
            )  # fmt: skip
        return found, total


def _check_page(limit: int, offset: int) -> None:
    if not 1 <= limit <= LIST_LIMIT_MAX:
        raise ValidationFailed(f"limit must be between 1 and {LIST_LIMIT_MAX}", field="limit")
    if offset < 0:
        raise ValidationFailed("offset must not be negative", field="offset")


async def places(tree: DocsTree, kb: str, relpaths: Sequence[str]) -> dict[str, str]:
    """Where files are on disk, by relative path: looked up in bulk, off the serving loop
    (a result page can name thousands)."""
    if not relpaths:
        return {}
    return await asyncio.to_thread(tree.places, kb, relpaths)


def place(where: dict[str, str], relpath: str) -> dict[str, str]:
    """Where a file is, as the API names it: `path` (absolute) and `relative_path`."""
    return {"path": where[relpath], "relative_path": relpath}


def remove_files(tree: DocsTree, kb: str, relpath: str, doc_id: str) -> None:
    """A document's Markdown file and its kept original (a failed add's own files only)."""
    tree.remove(kb, relpath)
    tree.remove_originals(kb, doc_id)


def _edited_text(current: bytes, body: str) -> str:
    """The new file: the caller's whole file, or its body under the current frontmatter."""
    given_frontmatter, _, _ = markdown.split_frontmatter(body)
    if given_frontmatter:
        return _mark_edited(body)
    old_text, _ = markdown.decode(current)
    old_frontmatter, old_body, _ = markdown.split_frontmatter(old_text)
    head = old_text[: len(old_text) - len(old_body)] if old_frontmatter else ""
    return _mark_edited(head + body)


def _mark_edited(text: str) -> str:
    frontmatter, body, _ = markdown.split_frontmatter(text)
    if frontmatter.get("source_mode") != "converted":
        return text  # the author's frontmatter is left exactly as written
    frontmatter["source_mode"] = "edited"
    return markdown.compose(frontmatter, body)


def _as_written(data: bytes) -> str:
    """A file's text with nothing made uniform (its line endings, a byte order mark); one
    that is not UTF-8 as indexing reads it."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return markdown.decode(data)[0]


def _jsonable(data: dict[str, Any]) -> dict[str, Any]:
    """YAML may hold dates and other non-JSON values; show them as text."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out[str(key)] = _jsonable(value)
        elif isinstance(value, str | int | float | bool | list) or value is None:
            out[str(key)] = value
        else:
            out[str(key)] = str(value)
    return out
