"""The daemon's log at its default level: one line per meaningful event (indexing and
embedding passes, with counts and a rate), nothing per save, no library chatter."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from cofferd.surfaces.cli import setup_logging
from tests.support.cofferd_process import start_cofferd
from tests.support.daemon import Daemon, cleanup, new_daemon, wait_for
from tests.support.fake_embeddings import FakeEmbeddings, serving
from tests.support.helpers import write

NOTES = 30
SAVES = 5


@pytest.fixture
def embeddings_server() -> Iterator[FakeEmbeddings]:
    """The fake provider on a loop of its own: the test waits on the daemon meanwhile."""
    with serving() as server:
        yield server


@pytest.fixture
def quiet_daemon(tmp_path: Path) -> Iterator[Daemon]:
    """A daemon started as a user starts it: no --log-level, no COFFER_LOG_LEVEL."""
    d = new_daemon(tmp_path)
    for i in range(NOTES):
        write(d.docs("vault") / f"note{i}.md", f"# Note {i}\n\nwords about topic {i}\n")
    d.log_handle = open(d.log, "ab")  # noqa: SIM115 - closed by stop()
    env = {k: v for k, v in d.env(COFFER_TEST_EMBED_KEY="sk-test").items()}
    env.pop("COFFER_LOG_LEVEL", None)
    d.proc = start_cofferd(env, log_level=None, stdout=d.log_handle, stderr=subprocess.STDOUT)
    try:
        wait_for(d.healthy, timeout=30)
        yield d
    finally:
        cleanup(d)


def _embedded(d: Daemon) -> bool:
    status = d.client.get("/api/v1/status")
    vault = next(kb for kb in status["knowledge_bases"] if kb["name"] == "vault")
    return vault.get("vectors", {}).get("embed_pending") == 0 and vault["progress"] is None


def test_the_default_log_has_a_line_per_pass_and_none_per_save(
    quiet_daemon: Daemon, embeddings_server: FakeEmbeddings
) -> None:
    d = quiet_daemon
    wait_for(lambda: d.client.get(d.client.kb("vault"))["name"] == "vault")
    wait_for(lambda: d.client.get("/api/v1/status")["startup_reconcile_done"])
    d.client.request("PATCH", d.client.kb("vault"), {"config": embeddings_server.config()})
    wait_for(lambda: embeddings_server.requests > 0 and _embedded(d), timeout=60)
    passes = len(d.log.read_text().splitlines())
    for i in range(SAVES):
        write(d.docs("vault") / "note0.md", f"# Note 0\n\nsaved again: marker{i}\n")
        query = {"query": f"marker{i}", "top_k": 1}
        wait_for(lambda q=query: d.client.post(d.client.kb("vault", "/search"), q)["passages"])
        wait_for(lambda: _embedded(d), timeout=30)
    assert d.stop() == 0
    lines = d.log.read_text().splitlines()
    assert not [line for line in lines if "watchfiles" in line or "HTTP Request" in line]
    starts = [line for line in lines if f"vault: embedding {NOTES} chunks" in line]
    ends = [line for line in lines if f"vault: embedding done: {NOTES} of {NOTES} chunks" in line]
    assert len(starts) == 1 and len(ends) == 1, lines
    assert " in " in ends[0] and "/s)" in ends[0]
    indexing = [line for line in lines if f"vault: indexing done: {NOTES} of {NOTES} files" in line]
    assert len(indexing) == 1, lines
    during_saves = lines[passes:]
    assert [line.split(" ", 3)[-1] for line in during_saves] == [
        "cofferd: stopping",
        "cofferd: stopped",
    ], during_saves


@pytest.fixture
def restored_logging() -> Iterator[None]:
    root, own = logging.getLogger(), logging.getLogger("cofferd")
    handlers, levels = root.handlers[:], (root.level, own.level)
    yield
    root.handlers[:] = handlers
    root.setLevel(levels[0])
    own.setLevel(levels[1])


@pytest.mark.usefixtures("restored_logging")
def test_libraries_are_heard_from_below_warning_only_at_debug() -> None:
    library, own = logging.getLogger("watchfiles.main"), logging.getLogger("cofferd.application")
    setup_logging("INFO")
    assert own.isEnabledFor(logging.INFO) and not library.isEnabledFor(logging.INFO)
    assert library.isEnabledFor(logging.WARNING)
    setup_logging("ERROR")
    assert not library.isEnabledFor(logging.WARNING) and not own.isEnabledFor(logging.WARNING)
    setup_logging("DEBUG")
    assert own.isEnabledFor(logging.DEBUG) and library.isEnabledFor(logging.DEBUG)
