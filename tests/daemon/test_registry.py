"""The KB registry: settings are read at start and when a settings file changes, never per
request; one lock per KB covers every change to it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from coffer_kernel.locations import Locations
from cofferd.domain.errors import DocumentChanged
from cofferd.domain.models import KnowledgeBase
from cofferd.infrastructure.files.kb_folders import KBFiles
from cofferd.infrastructure.storage import activity_store
from cofferd.surfaces.core import Coffer, Tuning
from tests.support.daemon import Daemon, wait_for
from tests.support.helpers import write


async def test_requests_never_read_settings_files(
    coffer: Coffer, kb: KnowledgeBase, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(docs / "a.md", "# A\n\nregistry words")
    await coffer.reindexer.reconcile(kb)
    reads = 0
    real_load = KBFiles.load

    def counting_load(self: KBFiles, name: str) -> KnowledgeBase | None:
        nonlocal reads
        reads += 1
        return real_load(self, name)

    monkeypatch.setattr(KBFiles, "load", counting_load)
    for _ in range(50):
        coffer.kbs.get("notes")
        coffer.kbs.list()
        await coffer.retrieval.search("notes", "registry")
        await coffer.documents.list("notes")
    await coffer.embeddings.run_once()
    assert reads == 0


def test_a_settings_file_edited_by_hand_is_picked_up(daemon: Daemon) -> None:
    d = daemon
    write(d.docs("notes") / "long.md", "# Long\n\n" + "\n\n".join("word " * 60 for _ in range(20)))
    wait_for(lambda: d.client.get(d.client.kb("notes", "/metrics"))["documents"] == 1)
    before = d.client.get(d.client.kb("notes", "/metrics"))["chunks"]
    path = d.home / "knowledge" / "notes" / "kb.yaml"
    path.write_text(path.read_text().replace("config: {}", "config:\n  chunk_size: 128"))
    wait_for(lambda: d.client.get(d.client.kb("notes"))["config"]["chunk_size"] == 128)
    wait_for(lambda: d.client.get(d.client.kb("notes", "/metrics"))["chunks"] > before)


async def test_version_checked_edits_cannot_both_win(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    write(docs / "shared.md", "# Shared\n\nfirst")
    await coffer.reindexer.reconcile(kb)
    (doc,), _ = await coffer.documents.list(kb.name)
    read = await coffer.documents.get(kb.name, doc.document.id)
    sha = read.document.content_sha256
    results = await asyncio.gather(
        *(
            coffer.documents.edit(kb.name, doc.document.id, f"agent {i}", actor="t",
                                  expected_sha256=sha)
            for i in range(5)
        ),
        return_exceptions=True,
    )  # fmt: skip
    assert sum(not isinstance(r, BaseException) for r in results) == 1
    assert sum(isinstance(r, DocumentChanged) for r in results) == 4


async def test_activity_logs_keep_a_window(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(activity_store, "TRIM_EVERY", 10)
    home = tmp_path / "home"
    async with await Coffer.open(
        Locations(home=home, socket=home / "s"), Tuning(activity_keep=30)
    ) as coffer:
        kb = await coffer.kbs.create("notes")
        for i in range(120):
            write(coffer.locations.docs_dir("notes") / f"n{i:03d}.md", f"# N{i}\n\ntext")
        await coffer.reindexer.reconcile(kb)
        for _ in range(25):
            await coffer.activity.record_invocation("agent", "search", 1.0, "ok")
        events = await coffer.stores.activity.audit_log(None, 1000)
        calls = await coffer.activity.invocations(1000)
        assert 30 <= len(events) <= 30 + 10
        assert events[0]["event"] == "kb_reindexed"  # the newest are the ones kept
        assert len(calls) == 25
    async with await Coffer.open(
        Locations(home=home, socket=home / "s"), Tuning(activity_keep=5)
    ) as coffer:  # a smaller window applies at once
        assert len(await coffer.stores.activity.audit_log(None, 1000)) == 5
        assert len(await coffer.activity.invocations(1000)) == 5


async def test_each_knowledge_base_has_its_own_keyword_index(coffer: Coffer) -> None:
    a = await coffer.kbs.create("alpha")
    b = await coffer.kbs.create("beta")
    write(coffer.locations.docs_dir("alpha") / "x.md", "# X\n\nshared word apple")
    write(coffer.locations.docs_dir("beta") / "y.md", "# Y\n\nshared word banana")
    await coffer.reindexer.reconcile(a)
    await coffer.reindexer.reconcile(b)
    hits = (await coffer.retrieval.search("alpha", "shared")).passages
    assert [p.path for p in hits] == ["x.md"]
    tables = await coffer.stores.db.read(
        lambda c: dict(c.execute("SELECT resource_name, table_name FROM fts_tables").fetchall())
    )
    assert set(tables) == {"alpha", "beta"} and len(set(tables.values())) == 2
    await coffer.kbs.delete("beta")
    names = await coffer.stores.db.read(
        lambda c: {r[0] for r in c.execute("SELECT name FROM sqlite_master")}
    )
    assert tables["beta"] not in names and tables["alpha"] in names
