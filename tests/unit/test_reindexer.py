from __future__ import annotations

import os
from pathlib import Path

from cofferd.domain.file_records import TreeScan
from cofferd.domain.models import KnowledgeBase
from cofferd.infrastructure.files.tree_scan import FileDocsTree
from cofferd.surfaces.core import Coffer
from tests.support.helpers import bump_mtime, skipped_in, total_changes, write


async def test_reconcile_indexes_new_changed_and_removed_files(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    write(docs / "a.md", "# Alpha\n\nfirst")
    write(docs / "projects" / "x.md", "# X\n\nsecond")
    r = await coffer.reindexer.reconcile(kb)
    assert (r.documents_added, r.documents_updated, r.documents_removed) == (2, 0, 0)

    write(docs / "a.md", "# Alpha\n\nfirst, edited")
    (docs / "projects" / "x.md").unlink()
    r = await coffer.reindexer.reconcile(kb)
    assert (r.documents_added, r.documents_updated, r.documents_removed) == (0, 1, 1)
    docs_list, total = await coffer.stores.catalog.list_documents(
        kb.name, q=None, limit=10, offset=0
    )
    assert total == 1 and docs_list[0].path == "a.md"
    events = [e["event"] for e in await coffer.stores.activity.audit_log(kb.name, 20)]
    for event in ("kb_document_ingested", "kb_document_updated", "kb_document_deleted"):
        assert event in events


async def test_unchanged_corpus_is_a_true_no_op(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    for i in range(30):
        write(docs / f"n{i}.md", f"# Note {i}\n\nbody {i}")
    await coffer.reindexer.reconcile(kb)
    before = await total_changes(coffer)
    r = await coffer.reindexer.reconcile(kb)
    assert r.documents_unchanged == 30 and not r.changed
    assert await total_changes(coffer) == before


async def test_touched_file_with_same_content_is_not_reindexed(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    path = write(docs / "a.md", "# A\n\ntext")
    await coffer.reindexer.reconcile(kb)
    bump_mtime(path)
    r = await coffer.reindexer.reconcile(kb)
    assert r.documents_updated == 0 and r.documents_unchanged == 1
    # the new mtime was remembered: the next reconcile does not read the file at all
    before = await total_changes(coffer)
    await coffer.reindexer.reconcile(kb)
    assert await total_changes(coffer) == before


async def test_same_size_same_mtime_edit_is_caught_by_sync_paths(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    path = write(docs / "a.md", "# A\n\naaaa")
    await coffer.reindexer.reconcile(kb)
    st = path.stat()
    path.write_text("# A\n\nbbbb")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    # stat is identical, so a full reconcile trusts it; the hash gate stays the truth for
    # the paths the watcher reports, which are re-read when their stat is unknown.
    r = await coffer.reindexer.reconcile(kb)
    assert r.documents_unchanged == 1


async def test_hidden_noise_and_non_markdown_files_are_ignored(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    for name in [
        ".hidden.md",
        ".a.md.swp",
        "4913",
        "a.md~",
        "#a.md#",
        "a.md.tmp",
        ".syncthing.a.md.tmp",
        "notes.rtf",
        "image.png",
        ".git/config.md",
    ]:
        write(docs / name, "noise")
    write(docs / "real.md", "real")
    r = await coffer.reindexer.reconcile(kb)
    assert r.documents_added == 1


async def test_symlinks_leaving_the_tree_are_not_followed(
    coffer: Coffer, kb: KnowledgeBase, docs: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    write(outside / "secret.md", "# Secret\n\nssh keys")
    (docs / "link.md").symlink_to(outside / "secret.md")
    (docs / "linkdir").symlink_to(outside, target_is_directory=True)
    write(docs / "inner" / "real.md", "# Real\n\ninside")
    (docs / "alias.md").symlink_to(docs / "inner" / "real.md")
    (docs / "loop").symlink_to(docs, target_is_directory=True)
    r = await coffer.reindexer.reconcile(kb)
    listed, _ = await coffer.stores.catalog.list_documents(kb.name, q=None, limit=10, offset=0)
    # a link inside the tree is not a second copy of its target (found once, where it is)
    assert sorted(d.path for d in listed) == ["inner/real.md"]
    assert r.documents_added == 1
    found = await coffer.retrieval.search(kb.name, "ssh keys")
    assert found.passages == []


async def test_a_folder_that_cannot_be_read_is_not_treated_as_empty(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    write(docs / "keep" / "a.md", "# A\n\nkept")
    write(docs / "b.md", "# B")
    await coffer.reindexer.reconcile(kb)

    class Failing(FileDocsTree):
        def scan(self, kb: str, under: str = "") -> TreeScan:
            full = super().scan(kb, under)
            files = {p: s for p, s in full.files.items() if not p.startswith("keep/")}
            return TreeScan(files=files, failed_dirs=["keep"])

    coffer.reindexer.tree = Failing(coffer.locations, coffer.policy)
    r = await coffer.reindexer.reconcile(kb)
    assert r.documents_removed == 0
    (docs / "b.md").unlink()
    r = await coffer.reindexer.reconcile(kb)
    assert r.documents_removed == 1


async def test_bad_files_never_stop_the_reconcile(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    (docs / "binary.md").write_bytes(bytes(range(256)) * 8)
    (docs / "bom.md").write_bytes(b"\xef\xbb\xbf# Bom\r\n\r\nwindows text\r\n")
    (docs / "nul.md").write_bytes(b"# Nul\n\nnul\x00byte")
    (docs / "latin1.md").write_bytes("# Caf\xe9\n\nna\xefve".encode("latin-1"))
    write(docs / "letterhead.md", "---\nACME Corp\n---\n\nquarterly letter")
    write(docs / "broken.md", "---\ntitle: [oops\n---\nbroken frontmatter body")
    write(docs / "good.md", "# Good\n\nfine")
    r = await coffer.reindexer.reconcile(kb)
    assert r.documents_added == 6
    assert (await coffer.retrieval.search(kb.name, "naïve")).passages[0].path == "latin1.md"
    assert [(s["relative_path"], s["reason"]) for s in r.skipped] == [
        ("binary.md", "binary content")
    ]
    assert r.skipped[0]["path"] == str(docs / "binary.md")
    for query, path in [
        ("windows", "bom.md"),
        ("quarterly", "letterhead.md"),
        ("broken", "broken.md"),
        ("nul", "nul.md"),
    ]:
        hits = (await coffer.retrieval.search(kb.name, query)).passages
        assert hits and hits[0].path == path
    # a skipped file is not read again until it changes, and is still listed
    r = await coffer.reindexer.reconcile(kb)
    assert r.documents_skipped == 1
    assert [s["relative_path"] for s in r.skipped] == ["binary.md"]


async def test_oversized_file_is_skipped_with_a_reason(coffer: Coffer, docs: Path) -> None:
    kb = await coffer.kbs.create("small", {"max_document_bytes": 1024})
    big = coffer.locations.docs_dir("small") / "big.md"
    write(big, "word " * 1000)  # over 4 x max_document_bytes
    r = await coffer.reindexer.reconcile(kb)
    assert [(s["relative_path"], s["reason"]) for s in r.skipped] == [("big.md", "too_large")]


async def test_hand_made_ids_survive_restart_and_rebuild(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    write(docs / "meeting notes.md", "# Meeting\n\nagenda")
    write(docs / "projects" / "x.md", "# X")
    write(docs / "01JDQ3V6N4Z8T5Y2X7W9R1K0MB.md", "# Coffer made me")
    before = {p: os.stat(docs / p).st_mtime_ns for p in ["meeting notes.md", "projects/x.md"]}
    await coffer.reindexer.reconcile(kb)
    first = {
        d.path: d.id
        for d in (await coffer.stores.catalog.list_documents(kb.name, q=None, limit=9, offset=0))[0]
    }
    assert first["01JDQ3V6N4Z8T5Y2X7W9R1K0MB.md"] == "01JDQ3V6N4Z8T5Y2X7W9R1K0MB"

    await coffer.close()
    coffer.locations.db_path.unlink()
    from cofferd.surfaces.core import Coffer as C

    again = await C.open(coffer.locations)
    try:
        await again.reindexer.reconcile(again.kbs.get(kb.name))
        docs_again, _ = await again.stores.catalog.list_documents(
            kb.name, q=None, limit=9, offset=0
        )
        assert {d.path: d.id for d in docs_again} == first
    finally:
        await again.close()
    # never rewritten or renamed behind the author's back
    assert {p: os.stat(docs / p).st_mtime_ns for p in before} == before


async def test_sync_paths_handles_files_and_folders(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    write(docs / "dir" / "a.md", "# A")
    write(docs / "dir" / "sub" / "b.md", "# B")
    r = await coffer.reindexer.sync_paths(kb, ["dir"])
    assert r.documents_added == 2
    (docs / "dir").rename(docs / "moved")
    r = await coffer.reindexer.sync_paths(kb, ["dir", "moved"])
    assert (r.documents_added, r.documents_removed) == (2, 2)
    listed, _ = await coffer.stores.catalog.list_documents(kb.name, q=None, limit=9, offset=0)
    assert sorted(d.path for d in listed) == ["moved/a.md", "moved/sub/b.md"]


async def test_decomposed_unicode_names_from_macos_are_indexed(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    import unicodedata

    folder = unicodedata.normalize("NFD", "réunions")
    name = unicodedata.normalize("NFD", "café.md")
    write(docs / folder / name, "# Café\n\ncroissant notes")
    r = await coffer.reindexer.reconcile(kb)
    assert r.documents_added == 1
    (doc,) = (await coffer.stores.catalog.list_documents(kb.name, q=None, limit=5, offset=0))[0]
    assert doc.path == unicodedata.normalize("NFC", "réunions/café.md")
    assert (await coffer.retrieval.search(kb.name, "croissant")).passages
    # an edit through the API writes the file that is there, under its own name
    await coffer.documents.edit(kb.name, doc.id, "# Café\n\npain au chocolat", actor="test")
    assert sorted(p.name for p in (docs / folder).iterdir()) == [name]
    assert "chocolat" in (docs / folder / name).read_text()
    # the watcher reports paths as keys (NFC): a folder sync must not drop the document
    r = await coffer.reindexer.sync_paths(kb, [unicodedata.normalize("NFC", "réunions")])
    assert r.documents_removed == 0
    assert r.documents_unchanged == 1


async def test_skipped_files_are_listed_until_fixed(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    (docs / "binary.md").write_bytes(bytes(range(256)) * 8)
    write(docs / "locked.md", "# Locked\n\nprivate words")
    os.chmod(docs / "locked.md", 0)
    write(docs / "fine.md", "# Fine")
    try:
        r = await coffer.reindexer.reconcile(kb)
        if os.access(docs / "locked.md", os.R_OK):  # root reads anything
            expected = [("binary.md", "binary content")]
        else:
            expected = [
                ("binary.md", "binary content"),
                ("locked.md", "unreadable: Permission denied"),
            ]
        assert [(s["relative_path"], s["reason"]) for s in r.skipped] == expected
        assert r.documents_skipped == len(expected)
        listed = await skipped_in(coffer, kb.name)
        assert [(s["relative_path"], s["reason"]) for s in listed] == expected
        assert listed[0]["path"] == str(docs / "binary.md")
        assert coffer.reindexer.skipped_count(kb.name) == len(expected)
    finally:
        os.chmod(docs / "locked.md", 0o600)
    # fixed without a change of size or time: seen at the next pass
    r = await coffer.reindexer.reconcile(kb)
    assert [s["relative_path"] for s in r.skipped] == ["binary.md"]
    # fixed by its author through the watcher's path: no longer listed
    write(docs / "binary.md", "# Text now")
    bump_mtime(docs / "binary.md")
    r = await coffer.reindexer.sync_paths(kb, ["binary.md"])
    assert (r.documents_added, r.skipped) == (1, [])
    assert await skipped_in(coffer, kb.name) == []
    assert coffer.reindexer.skipped_count(kb.name) == 0


async def test_the_watcher_path_lists_what_it_skips(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    (docs / "binary.md").write_bytes(bytes(range(256)) * 8)
    r = await coffer.reindexer.sync_paths(kb, ["binary.md"])
    assert [s["relative_path"] for s in r.skipped] == ["binary.md"]
    r = await coffer.reindexer.sync_paths(kb, ["binary.md"])  # from the skip cache
    assert (r.documents_skipped, [s["relative_path"] for s in r.skipped]) == (1, ["binary.md"])
    (docs / "binary.md").unlink()
    await coffer.reindexer.sync_paths(kb, ["binary.md"])
    assert await skipped_in(coffer, kb.name) == []
