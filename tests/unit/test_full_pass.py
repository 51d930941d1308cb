"""A full pass made cheap for a large KB (no object per unchanged file, one look per folder
at what its names are, folders opened without following a link) stays exactly right."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from coffer_kernel.locations import Locations
from cofferd.domain.file_records import FileStat
from cofferd.domain.index_records import IndexedFiles
from cofferd.domain.models import KnowledgeBase
from cofferd.infrastructure.files.document_policy import Kind
from cofferd.surfaces.core import Coffer, Tuning
from tests.support.file_trees import make_tree
from tests.support.helpers import write

NAMES = [
    "a.md", "B.MARKDOWN", "notes.txt", ".hidden.md", "~$lock.md", "x.md~", "#x.md#", "4913",
    "draft.tmp", "node_modules/m.md", "plan.sync-conflict-20261130-101500-ABCDEFG.md",
    "plan (conflicted copy 2026-11-30 101500).md", "café.md", "sub/.cofferignore",
]  # fmt: skip


def test_indexed_files_tell_what_changed_and_what_is_gone() -> None:
    indexed = IndexedFiles(
        [
            ("same.md", 10, 100),
            ("touched.md", 10, 100),
            ("grown.md", 10, 100),
            ("rechunked.md", 10, None),  # chunked otherwise than the KB chunks now
            ("gone.md", 10, 100),
        ]
    )
    files = {
        "same.md": (10, 100),
        "touched.md": (10, 101),
        "grown.md": (11, 100),
        "rechunked.md": (10, 100),
        "new.md": (1, 1),
    }
    fits = lambda path, size: False  # noqa: E731
    assert sorted(indexed.changed(files, fits)) == [
        "grown.md",
        "new.md",
        "rechunked.md",
        "touched.md",
    ]
    # a file indexed as it is, now over its KB's (lowered) size limit
    assert indexed.changed({"same.md": (10, 100)}, lambda path, size: size > 9) == ["same.md"]
    assert indexed.gone(files) == ["gone.md"]
    assert "same.md" in indexed and "new.md" not in indexed and len(indexed) == 5
    assert FileStat(10, 100) == files["same.md"]  # a scan's plain tuple equals its FileStat


async def test_the_index_lists_its_files_lightly_and_tells_more_of_those_asked(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    for i in range(3):
        write(docs / "sub" / f"n{i}.md", f"# Note {i}\n\nword{i}\n")
    await coffer.reindexer.reconcile(kb)
    store, chunking = coffer.stores.index, kb.config.chunking_key()
    files = coffer.reindexer.tree.scan(kb.name).files
    fits = lambda path, size: False  # noqa: E731
    assert (await store.indexed_files(kb.name, chunking)).changed(files, fits) == []
    rechunked = await store.indexed_files(kb.name, chunking + "-other", ["sub/n1.md"])
    assert list(rechunked) == ["sub/n1.md"] and rechunked.changed(files, fits) == list(files)
    details = await store.indexed_details(kb.name, ["sub/n0.md", "sub/none.md", "sub"])
    assert list(details) == ["sub/n0.md"]
    assert details["sub/n0.md"].stat == FileStat(*files["sub/n0.md"])
    assert details["sub/n0.md"].chunking == chunking


async def test_a_folder_classifies_its_names_as_the_policy_does(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    make_tree(docs)
    for name in NAMES:
        write(docs / name, "x")
        write(docs / "sub" / "deeper" / name, "x")
    policy = coffer.policy
    policy.fresh_ignore_rules(kb.name)
    coffer.boundary.root(kb.name)
    seen = 0
    for folder, dirs, files in os.walk(docs):
        relfolder = Path(folder).relative_to(docs).as_posix().removeprefix(".")
        names = policy.in_folder(kb.name, relfolder)
        for name, is_dir in [*((d, True) for d in dirs), *((f, False) for f in files)]:
            relpath = f"{relfolder}/{name}" if relfolder else name
            expected = policy.classify(kb.name, relpath, is_dir)
            found = Kind.OTHER if names is None else names.classify(relpath, name, is_dir)
            assert found is expected, relpath
            seen += 1
    assert seen > 60


async def test_a_pass_notices_every_change_among_unchanged_files(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    for i in range(50):
        write(docs / f"d{i // 10}" / f"n{i}.md", f"# Note {i}\n\nword{i} text\n")
    first = await coffer.reindexer.reconcile(kb)
    assert first.documents_added == 50
    same_size = docs / "d0" / "n1.md"
    st = same_size.stat()
    same_size.write_text("# Note 1\n\nword9 text\n")  # same size, new time
    os.utime(same_size, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    same_time = docs / "d0" / "n2.md"
    st = same_time.stat()
    same_time.write_text("# Note 2\n\nword2 text and more\n")  # new size, same time
    os.utime(same_time, ns=(st.st_atime_ns, st.st_mtime_ns))
    (docs / "d1" / "n10.md").unlink()
    (docs / "d1" / "n11.md").rename(docs / "d2" / "moved.md")
    write(docs / "d3" / "new.md", "# New\n\nfresh\n")
    again = await coffer.reindexer.reconcile(kb)
    assert (again.documents_added, again.documents_updated, again.documents_removed) == (2, 2, 2)
    assert again.documents_unchanged == 46
    assert (await coffer.reindexer.reconcile(kb)).documents_unchanged == 50


async def test_a_folder_swapped_for_a_link_while_scanned_is_not_followed(
    coffer: Coffer, kb: KnowledgeBase, docs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(docs / "sub" / "a.md", "# A\n\nkept\n")
    write(tmp_path / "outside" / "secret.md", "# Secret\n\nnot ours\n")
    assert (await coffer.reindexer.reconcile(kb)).documents_added == 1
    policy = coffer.policy
    in_folder = policy.in_folder

    def swap_then_look(name: str, folder: str):  # type: ignore[no-untyped-def]
        if folder == "" and not (docs / "sub").is_symlink():  # sub/ listed, not yet opened
            (docs / "sub").rename(tmp_path / "sub-aside")
            (docs / "sub").symlink_to(tmp_path / "outside", target_is_directory=True)
        return in_folder(name, folder)

    monkeypatch.setattr(policy, "in_folder", swap_then_look)
    scan = coffer.reindexer.tree.scan(kb.name)
    assert "sub/secret.md" not in scan.files
    assert list(scan.failed_dirs) == ["sub"]  # refused: its files' absence proves nothing
    result = await coffer.reindexer.reconcile(kb)  # a link now: what was below it is gone
    assert (result.documents_added, result.documents_removed) == (0, 1)


async def _running_workers(coffer: Coffer, count: int) -> int:
    """The preparing workers running once `count` are, or after 10 s."""
    deadline = time.monotonic() + 10
    while coffer.preparer.status()["running"] < count and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    return int(coffer.preparer.status()["running"])


async def test_a_new_index_of_a_kb_starts_every_preparing_worker_at_once(
    locations: Locations,
) -> None:
    """Every file of a KB over a new index is to be prepared: its workers start with the
    daemon (their start overlaps the rest of it); over an index that was there, or with no
    KB, only the express one starts."""
    tuning = Tuning(workers=2)
    empty = await Coffer.open(locations, tuning)
    try:
        await empty.kbs.create("notes")
        await _running_workers(empty, 1)
        await asyncio.sleep(0.3)
        assert empty.preparer.status()["running"] == 1
    finally:
        await empty.close()
    kept = await Coffer.open(locations, tuning)
    try:
        await asyncio.sleep(0.3)
        assert kept.preparer.status()["running"] == 1
    finally:
        await kept.close()
    locations.db_path.unlink()  # the index is derived: the next start builds it anew
    new = await Coffer.open(locations, tuning)
    try:
        assert await _running_workers(new, 3) == 3
    finally:
        await new.close()
