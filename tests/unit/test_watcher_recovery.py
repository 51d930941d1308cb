"""The watcher outlives its backend, and the periodic reconcile runs on its own."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import watchfiles

from cofferd.application.indexing import indexing as indexing_module
from cofferd.application.indexing.indexing import IndexingService
from cofferd.domain.models import KnowledgeBase
from cofferd.surfaces import watcher as watcher_module
from cofferd.surfaces.core import Coffer
from tests.support.helpers import write


async def until(condition: Any, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met"
        await asyncio.sleep(0.01)


async def test_a_failing_backend_is_restarted_and_repaired(
    coffer: Coffer, kb: KnowledgeBase, docs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_awatch = watchfiles.awatch
    calls = 0

    def flaky_awatch(*args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        nonlocal calls
        calls += 1
        if calls == 1:
            return failing()
        return real_awatch(*args, **kwargs)

    async def failing() -> AsyncIterator[Any]:
        write(docs / "missed.md", "# Missed\n\nwritten while the watcher was down")
        raise RuntimeError("notify backend lost its inotify instance")
        yield  # pragma: no cover

    monkeypatch.setattr(watcher_module.watchfiles, "awatch", flaky_awatch)
    monkeypatch.setattr(indexing_module, "RESTART_S", (0.01,))
    indexing = coffer.indexing
    w = coffer.watcher()
    indexing.start(full_reconcile=False)
    w.start()
    try:
        await until(lambda: w.state.restarts == 1)
        assert "inotify" in (w.state.last_error or "")
        # the full reconcile after the restart finds what the dead watcher missed
        await until(lambda: indexing.state.last_full_reconcile_at is not None)
        assert (await coffer.retrieval.search("notes", "missed")).passages
        # and the restarted watcher sees new saves
        deadline = asyncio.get_running_loop().time() + 10
        write(docs / "later.md", "# Later\n\nseen by the new watcher")
        while not (await coffer.retrieval.search("notes", "seen")).passages:
            assert asyncio.get_running_loop().time() < deadline, "the new save was not indexed"
            if w.state.events_seen == 0:  # the new watch may have started after the write
                write(docs / "later.md", "# Later\n\nseen by the new watcher, again")
            await asyncio.sleep(0.05)
        assert w.state.restarts == 1
    finally:
        await w.stop()
        await indexing.stop()


async def test_periodic_full_reconcile(coffer: Coffer, kb: KnowledgeBase) -> None:
    w = IndexingService(coffer.kbs, coffer.reindexer, coffer.embeddings, reconcile_interval_s=0.05)
    w.start(full_reconcile=False)
    try:
        await until(lambda: w.state.last_full_reconcile_at is not None)
        first = w.state.last_full_reconcile_at
        await until(lambda: w.state.last_full_reconcile_at != first)
    finally:
        await w.stop()


async def test_a_folder_attached_is_watched_at_once(
    coffer: Coffer, kb: KnowledgeBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A KB created, attached or deleted is watched (or no longer) at once, not at the next
    look at the layout (an hour away here): saves in an attached folder's first seconds
    come as events."""
    monkeypatch.setattr(watcher_module, "LAYOUT_CHECK_S", 3600.0)
    indexing = coffer.indexing
    w = coffer.watcher()
    indexing.start(full_reconcile=False)
    w.start()
    try:
        await until(lambda: w.state.running)
        folder = tmp_path / "attached"
        folder.mkdir()
        await coffer.kbs.create("papers", folder=folder)
        await until(lambda: "papers" in w.status()["watching"], timeout=5)
        seen = w.state.events_seen
        write(folder / "first.md", "# First\n\nzqattachedtoken, saved at once")
        await until(lambda: w.state.events_seen > seen)  # by the watch of its folder
        deadline = asyncio.get_running_loop().time() + 10
        while not (hits := await coffer.retrieval.search("papers", "zqattachedtoken")).passages:
            assert asyncio.get_running_loop().time() < deadline, "the save was not indexed"
            await asyncio.sleep(0.05)
        assert [p.path for p in hits.passages] == ["first.md"]
    finally:
        await w.stop()
        await indexing.stop()
