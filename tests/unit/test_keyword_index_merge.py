"""A pass that writes many documents leaves the KB's keyword index in one piece
(reindexer.MERGE_AFTER_DOCUMENTS, lowered here): every query reads each piece. The merge
runs once the pass has answered: the KB is searchable before it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cofferd.application.indexing import reindexer
from cofferd.domain.models import KnowledgeBase
from cofferd.infrastructure.storage import fts_index
from cofferd.surfaces.core import Coffer
from tests.support.helpers import write


async def pieces_left(coffer: Coffer, kb: str) -> bool:
    """Whether merging still finds pieces to merge (one step of one page)."""
    return await coffer.stores.db.write(lambda conn: fts_index.merge_step(conn, kb, 1))


@pytest.mark.parametrize(("merge_after", "merged"), [(10, True), (10**6, False)])
async def test_a_bulk_pass_merges_the_keyword_index(
    coffer: Coffer,
    kb: KnowledgeBase,
    docs: Path,
    monkeypatch: pytest.MonkeyPatch,
    merge_after: int,
    merged: bool,
) -> None:
    monkeypatch.setattr(reindexer, "BATCH", 3)  # a commit, and an index piece, per 3 notes
    monkeypatch.setattr(reindexer, "MERGE_AFTER_DOCUMENTS", merge_after)
    for i in range(30):
        write(docs / f"n{i:02}.md", f"# Note {i}\n\nalpha beta word{i}\n")
    result = await coffer.reindexer.reconcile(kb)
    assert result.documents_added == 30
    await coffer.reindexer.upkeep_done()
    assert await pieces_left(coffer, kb.name) is not merged
    found = await coffer.retrieval.search(kb.name, "word7", top_k=3)
    assert [p.path for p in found.passages] == ["n07.md"]


def held_merge(coffer: Coffer, docs: Path, monkeypatch: pytest.MonkeyPatch) -> asyncio.Event:
    """30 notes written for a bulk pass (batches of 3) whose merge after it waits for the
    event returned to be set."""
    monkeypatch.setattr(reindexer, "BATCH", 3)
    monkeypatch.setattr(reindexer, "MERGE_AFTER_DOCUMENTS", 10)
    store = coffer.reindexer.store
    merge = store.merge_keyword_index
    go = asyncio.Event()

    async def held(name: str) -> None:
        await go.wait()
        await merge(name)

    monkeypatch.setattr(store, "merge_keyword_index", held)
    for i in range(30):
        write(docs / f"n{i:02}.md", f"# Note {i}\n\nalpha beta word{i}\n")
    return go


async def test_the_merge_waits_for_the_pass_to_answer(
    coffer: Coffer, kb: KnowledgeBase, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass answers while its merge is held back; search is right meanwhile, and the
    index is in one piece once the merge has run."""
    go = held_merge(coffer, docs, monkeypatch)
    result = await asyncio.wait_for(coffer.reindexer.reconcile(kb), timeout=5)
    assert result.documents_added == 30
    found = await coffer.retrieval.search(kb.name, "word7", top_k=3)
    assert [p.path for p in found.passages] == ["n07.md"]
    go.set()
    await coffer.reindexer.upkeep_done()
    assert await pieces_left(coffer, kb.name) is False
    found = await coffer.retrieval.search(kb.name, "word7", top_k=3)
    assert [p.path for p in found.passages] == ["n07.md"]


async def automerge(coffer: Coffer, kb: str) -> int | None:
    """The KB's FTS5 `automerge` as its table's config holds it (None: FTS5's default)."""
    name = fts_index.table_name(kb)
    row = await coffer.stores.db.read(
        lambda conn: conn.execute(f"SELECT v FROM {name}_config WHERE k = 'automerge'").fetchone()
    )
    return None if row is None else int(row[0])


async def test_a_bulk_pass_leaves_merging_to_the_merge_after_it(
    coffer: Coffer, kb: KnowledgeBase, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a bulk pass writes, FTS5 merges none of its pieces (they are merged once,
    after it); once they are one, pieces merge as they are written again."""
    go = held_merge(coffer, docs, monkeypatch)
    await asyncio.wait_for(coffer.reindexer.reconcile(kb), timeout=5)
    assert await automerge(coffer, kb.name) == 0
    found = await coffer.retrieval.search(kb.name, "word7", top_k=3)
    assert [p.path for p in found.passages] == ["n07.md"]
    go.set()
    await coffer.reindexer.upkeep_done()
    assert await pieces_left(coffer, kb.name) is False
    assert await automerge(coffer, kb.name) == fts_index.AUTOMERGE


async def test_a_bulk_load_a_stop_cut_short_merges_as_written_after_a_start(
    coffer: Coffer, kb: KnowledgeBase
) -> None:
    await coffer.stores.index.bulk_load(kb.name)
    assert await automerge(coffer, kb.name) == 0
    again = await Coffer.open(coffer.locations)
    try:
        assert await automerge(again, kb.name) == fts_index.AUTOMERGE
    finally:
        await again.close()
