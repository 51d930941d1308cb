from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
import yaml

from coffer_kernel.locations import Locations
from cofferd.domain.errors import KBExists, KBNotFound, ValidationFailed
from cofferd.domain.models import KnowledgeBase
from cofferd.surfaces.core import Coffer
from tests.support.helpers import index_dump, write


async def test_create_writes_folders_and_settings(coffer: Coffer, locations: Locations) -> None:
    kb = await coffer.kbs.create("work", {"chunk_size": 256})
    assert locations.docs_dir("work").is_dir() and locations.raw_dir("work").is_dir()
    saved = yaml.safe_load(locations.kb_config_path("work").read_text())
    assert saved["config"] == {"chunk_size": 256} and saved["enabled"] is True
    assert kb.config.chunk_size == 256
    assert [k.name for k in coffer.kbs.list()] == ["work"]
    (event,) = [e for e in await coffer.stores.activity.audit_log("work", 10)]
    assert event["event"] == "resource_created" and event["details"]["config"]["chunk_size"] == 256


async def test_create_refuses_duplicates_bad_names_and_bad_config(coffer: Coffer) -> None:
    await coffer.kbs.create("work")
    with pytest.raises(KBExists):
        await coffer.kbs.create("work")
    with pytest.raises(ValidationFailed):
        await coffer.kbs.create("../escape")
    with pytest.raises(ValidationFailed, match="chunk_size"):
        await coffer.kbs.create("other", {"chunk_size": 1})
    assert not (coffer.locations.home / "escape").exists()
    assert [k.name for k in coffer.kbs.list()] == ["work"]


async def test_delete_cascades_rows_and_folder(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    write(docs / "a.md", "# A\n\nalpha")
    await coffer.reindexer.reconcile(kb)
    await coffer.kbs.delete("notes")
    assert not coffer.locations.kb_dir("notes").exists()
    dump = await index_dump(coffer, "notes")
    assert dump["documents"] == [] and dump["chunks"] == [] and dump["orphan_fts_rows"] == 0
    with pytest.raises(KBNotFound):
        coffer.kbs.get("notes")
    deleted = (await coffer.stores.activity.audit_log("notes", 1))[0]
    assert deleted["event"] == "resource_deleted" and deleted["details"]["name"] == "notes"


async def test_chunking_change_rechunks_the_corpus(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    write(docs / "long.md", "# Long\n\n" + "\n\n".join("para " + "w " * 60 for _ in range(20)))
    await coffer.reindexer.reconcile(kb)
    before = (await coffer.stores.index.metrics("notes"))["chunks"]
    update = await coffer.kbs.update_config("notes", {"chunk_size": 64, "chunk_overlap": 0})
    assert update.rechunked is True and update.warnings == []
    assert update.reindex is None and update.reindexing == "chunking changed"
    # the pass the change asked for runs in the background: here, as the indexing runs it
    change = coffer.kbs.pass_began("notes")
    result = await coffer.reindexer.reconcile(coffer.kbs.get("notes"))
    coffer.kbs.pass_ended("notes", change)
    assert result.documents_updated == 1 and "notes" not in coffer.kbs.pending
    assert (await coffer.stores.index.metrics("notes"))["chunks"] > before
    # a settings change that does not touch chunking does not re-chunk
    update = await coffer.kbs.update_config("notes", {"auto_update_sources": True})
    assert update.reindex is None and update.rechunked is False
    assert coffer.kbs.get("notes").config.auto_update_sources is True


async def test_a_copied_kb_folder_is_adopted_with_its_settings(
    coffer: Coffer, tmp_path: Path
) -> None:
    await coffer.kbs.create("travel", {"chunk_size": 128})
    write(coffer.locations.docs_dir("travel") / "trip.md", "# Kyoto\n\ntemples")
    other_home = tmp_path / "machine-b"
    shutil.copytree(coffer.locations.kb_dir("travel"), other_home / "knowledge" / "travel")
    other = await Coffer.open(Locations(home=other_home, socket=tmp_path / "b.sock"))
    try:
        kb = await other.kbs.adopt("travel")
        assert kb.config.chunk_size == 128
        await other.reindexer.reconcile(kb)
        hits = (await other.retrieval.search("travel", "temples")).passages
        assert [h.title for h in hits] == ["Kyoto"]
    finally:
        await other.close()


async def test_broken_settings_file_falls_back_to_defaults_and_is_kept(
    coffer: Coffer, kb: KnowledgeBase, locations: Locations
) -> None:
    path = locations.kb_config_path("notes")
    path.write_text("config: [this is not a mapping")
    assert coffer.kbs.get("notes").config.chunk_size == 512
    for change in (
        coffer.kbs.update_config("notes", {"chunk_size": 256}),
        coffer.kbs.set_enabled("notes", False),
    ):
        with pytest.raises(ValidationFailed, match="fix it first"):
            await change
    assert path.read_text() == "config: [this is not a mapping"


async def test_raising_the_size_limit_indexes_what_was_skipped(coffer: Coffer) -> None:
    kb = await coffer.kbs.create("sizes", {"max_document_bytes": 1024})
    write(coffer.locations.docs_dir("sizes") / "big.md", "word " * 1000)
    assert (await coffer.reindexer.reconcile(kb)).documents_skipped == 1
    update = await coffer.kbs.update_config("sizes", {"max_document_bytes": 1024 * 1024})
    assert update.reindexing == "size limit changed"
    assert update.rechunked is False  # read again, not chunked differently
    assert (await coffer.reindexer.reconcile(coffer.kbs.get("sizes"))).documents_added == 1


async def test_metrics(coffer: Coffer, kb: KnowledgeBase, docs: Path) -> None:
    write(docs / "a.md", "# A\n\nalpha")
    await coffer.reindexer.reconcile(kb)
    m = await coffer.kbs.metrics("notes")
    assert m["documents"] == 1 and m["chunks"] == 1 and m["documents_degraded"] == 0
    assert m["modes"] == ["keyword", "grep"] and m["disk_bytes"] > 0


async def test_a_docs_folder_without_settings_is_adopted_once(coffer: Coffer) -> None:
    docs = coffer.locations.docs_dir("plain")
    write(docs / "a.md", "# A")
    kb = await coffer.kbs.adopt("plain")
    assert coffer.locations.kb_config_path("plain").is_file()
    assert coffer.kbs.get("plain").created_at == kb.created_at


async def test_two_settings_changes_at_once_both_persist(coffer: Coffer, kb: KnowledgeBase) -> None:
    await asyncio.gather(
        coffer.kbs.update_config("notes", {"default_mode": "grep"}),
        coffer.kbs.update_config("notes", {"chunk_overlap": 32}),
        coffer.kbs.update_config("notes", {"auto_update_sources": True}),
    )
    saved = await coffer.registry.reload("notes")  # as the files say
    assert saved is not None
    assert saved.config.default_mode == "grep"
    assert saved.config.chunk_overlap == 32
    assert saved.config.auto_update_sources is True
