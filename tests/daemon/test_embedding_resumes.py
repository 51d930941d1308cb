"""Embedding catch-up survives a restart: what was embedded before it stays, only what
was not is embedded after it (the queue is the index's own embed flags)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import Daemon, cleanup, new_daemon, wait_for
from tests.support.fake_embeddings import FakeEmbeddings, serving
from tests.support.helpers import write

NOTES = 40  # the queue takes 16 documents a batch


@pytest.fixture
def server() -> Iterator[FakeEmbeddings]:
    with serving() as fake:
        yield fake


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[Daemon]:
    d = new_daemon(tmp_path)
    for i in range(NOTES):
        write(d.docs("vault") / f"note{i:02}.md", f"# Note {i}\n\nwords about topic{i}\n")
    try:
        yield d.start(COFFER_TEST_EMBED_KEY="sk-test")
    finally:
        cleanup(d)


def _vault(d: Daemon) -> dict[str, Any]:
    status = d.client.get("/api/v1/status")
    return next(kb for kb in status["knowledge_bases"] if kb["name"] == "vault")


def test_a_restart_embeds_only_what_was_not_embedded(
    daemon: Daemon, server: FakeEmbeddings
) -> None:
    d = daemon
    wait_for(lambda: d.client.get("/api/v1/status")["startup_reconcile_done"])
    server.slow_after = 1  # one batch is answered; the next hangs until the stop
    d.client.request("PATCH", d.client.kb("vault"), {"config": server.config()})
    wait_for(lambda: server.requests >= 2, timeout=30)
    before = list(server.inputs)
    assert len(before) == 16
    progress = _vault(d)["progress"]
    assert progress["phase"] == "embedding" and progress["done"] == 16
    assert progress["total"] == NOTES and progress["eta_s"] > 0
    d.stop()

    server.slow_after = None
    d.start(COFFER_TEST_EMBED_KEY="sk-test")
    wait_for(lambda: _vault(d)["vectors"]["embed_pending"] == 0, timeout=60)
    after = server.inputs[len(before) :]
    assert len(after) == NOTES - 16
    assert not set(after) & set(before)
    assert _vault(d)["documents_degraded"] == 0
