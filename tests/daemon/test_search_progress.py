"""A search while a knowledge base is being indexed says so, in the API, on cofferctl's
stderr and in MCP answers: right after a large folder is attached its passages are few or
none, and the answer must not look complete.

Deterministic without timing: the first search after attaching comes before the folder's
first pass can end (the watcher has to notice it and read 3,000 files), and the state is
then held by stopping the daemon's worker processes (SIGSTOP) while it is looked at."""

from __future__ import annotations

import contextlib
import os
import re
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mcp import Client

from tests.support.cli import ctl
from tests.support.daemon import Daemon, wait_for
from tests.support.mcp_client import call, params

NOTES = 3000
QUERY = {"query": "lighthouse", "top_k": 5}


def vault(tmp_path: Path) -> Path:
    folder = tmp_path / "vault"
    folder.mkdir()
    for i in range(NOTES):
        (folder / f"note-{i:04}.md").write_text(f"# Note {i}\n\nThe lighthouse keeper, day {i}.")
    return folder


def search(d: Daemon) -> dict[str, Any]:
    return dict(d.client.post(d.client.kb("vault", "/search"), QUERY))


def counting(d: Daemon) -> dict[str, Any] | None:
    """The search answer once it counts the files indexed, of all there are."""
    answer = search(d)
    indexing = answer.get("indexing")
    return answer if indexing and indexing["total"] == NOTES > indexing["done"] else None


@contextlib.contextmanager
def workers_stopped(d: Daemon) -> Iterator[None]:
    """Indexing held where it is: the daemon's worker processes stopped, then resumed."""
    pids = d.client.get("/api/v1/status")["workers"]["pids"]
    assert pids
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


def indexed(d: Daemon) -> int:
    (kb,) = [k for k in d.client.get("/api/v1/status")["knowledge_bases"] if k["name"] == "vault"]
    return int(kb["documents"])


async def test_a_search_while_indexing_says_how_far_it_is(daemon: Daemon, tmp_path: Path) -> None:
    d = daemon
    d.client.post("/api/v1/knowledge_bases", {"name": "vault", "path": str(vault(tmp_path))})
    first = search(d)  # its first pass cannot have ended yet
    assert first["indexing"]["done"] < NOTES and len(first["passages"]) < NOTES
    wait_for(lambda: counting(d), timeout=60)
    with workers_stopped(d):
        answer = search(d)
        done = answer["indexing"]["done"]
        assert answer["indexing"] == {"done": done, "total": NOTES} and done < NOTES
        assert indexed(d) < NOTES  # the answer is indeed incomplete
        several = d.client.post("/api/v1/search", {**QUERY, "knowledge_bases": ["vault"]})
        assert several["knowledge_bases"]["vault"]["indexing"]["total"] == NOTES
        printed = ctl(d, "search", "vault", "lighthouse")
        assert printed.returncode == 0, printed.stderr
        line = re.fullmatch(
            r"vault: still indexing ([\d,]+) of 3,000 files; results may be incomplete\n",
            printed.stderr,
        )
        assert line and int(line[1].replace(",", "")) < NOTES, printed.stderr
        async with Client(params(d.socket)) as client:
            found = await call(client, "search", kb="vault", query="lighthouse")
            assert found["indexing"]["total"] == NOTES
            every = await call(client, "search_all", query="lighthouse")
            assert every["knowledge_bases"]["vault"]["indexing"]["total"] == NOTES
    # once indexed, nothing more is said, and the answer is whole
    wait_for(lambda: "indexing" not in search(d), timeout=120)
    assert indexed(d) == NOTES
    assert "indexing" not in d.client.post("/api/v1/search", QUERY)["knowledge_bases"]["vault"]
    printed = ctl(d, "search", "vault", "lighthouse")
    assert printed.returncode == 0 and printed.stderr == ""
