"""While a bulk load writes, the WAL is written back into the database every ~64 MB
rather than every ~4 MB (a cold index wrote it back a dozen times, 0.1 s of the one
writer's CPU); once the load has ended (a bulk pass gives space back at its end) it is
written back, and SQLite's default holds again."""

from __future__ import annotations

from pathlib import Path

from cofferd.domain.models import KnowledgeBase
from cofferd.infrastructure.storage import sqlite
from cofferd.surfaces.core import Coffer
from tests.support.helpers import write


async def checkpoint_pages(coffer: Coffer) -> int:
    row = await coffer.stores.db.write(lambda c: c.execute("PRAGMA wal_autocheckpoint").fetchone())
    return int(row[0])


async def test_a_bulk_load_writes_the_wal_back_less_often(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    write(docs / "n0.md", "# Note 0\n\n" + "word and more words here\n" * 4000)  # ~100 KB
    await coffer.reindexer.sync_paths(kb, ["n0.md"])  # a large batch, and no reclaim
    assert await checkpoint_pages(coffer) == sqlite.BULK_CHECKPOINT_PAGES
    write(docs / "n1.md", "# Note 1\n\na short note\n")
    assert (await coffer.reindexer.reconcile(kb)).documents_added == 1  # a bulk pass's end
    assert await checkpoint_pages(coffer) == sqlite.CHECKPOINT_PAGES
    found = await coffer.retrieval.search(kb.name, "short", top_k=3)
    assert [p.path for p in found.passages] == ["n1.md"]
