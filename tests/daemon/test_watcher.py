"""The real daemon keeps the index equal to a fresh rebuild, whatever editors and tools do."""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.daemon import Daemon, wait_for
from tests.support.helpers import assert_matches_rebuild, write


def new_kb(d: Daemon) -> str:
    name = "w-" + uuid.uuid4().hex[:8]
    d.client.post("/api/v1/knowledge_bases", {"name": name})
    return name


def found(d: Daemon, kb: str, query: str) -> list[str]:
    body = d.client.post(d.client.kb(kb, "/search"), {"query": query, "top_k": 50})
    return sorted(p["relative_path"] for p in body["passages"])


def test_editor_save_patterns(shared_daemon: Daemon, tmp_path: Path) -> None:
    d = shared_daemon
    kb = new_kb(d)
    docs = d.docs(kb)

    # 1. write in place
    path = write(docs / "inplace.md", "# In place\n\nalpha")
    wait_for(lambda: found(d, kb, "alpha") == ["inplace.md"])
    path.write_text("# In place\n\nbravo")
    wait_for(lambda: found(d, kb, "bravo") == ["inplace.md"] and not found(d, kb, "alpha"))

    # 2. write a temp file, then rename it over the document (most GUI editors)
    tmp = docs / ".atomic.md.tmp123"
    tmp.write_text("# Atomic\n\ncharlie")
    os.replace(tmp, docs / "atomic.md")
    wait_for(lambda: found(d, kb, "charlie") == ["atomic.md"])

    # 3. vim: rename the original to a backup, write a new file, delete the backup
    write(docs / "vim.md", "# Vim\n\ndelta")
    wait_for(lambda: found(d, kb, "delta") == ["vim.md"])
    os.rename(docs / "vim.md", docs / "vim.md~")
    (docs / "4913").write_text("")
    (docs / "4913").unlink()
    (docs / "vim.md").write_text("# Vim\n\necho")
    (docs / "vim.md~").unlink()
    wait_for(lambda: found(d, kb, "echo") == ["vim.md"] and not found(d, kb, "delta"))

    # 4. delete and recreate within one debounce window
    write(docs / "flip.md", "# Flip\n\nfoxtrot")
    wait_for(lambda: found(d, kb, "foxtrot") == ["flip.md"])
    (docs / "flip.md").unlink()
    (docs / "flip.md").write_text("# Flip\n\ngolf")
    wait_for(lambda: found(d, kb, "golf") == ["flip.md"] and not found(d, kb, "foxtrot"))

    # 5. append in several writes
    with open(docs / "append.md", "w") as fh:
        for word in ["hotel", "india", "juliett"]:
            fh.write(f"{word}\n\n")
            fh.flush()
    wait_for(lambda: found(d, kb, "juliett") == ["append.md"])

    # swap files, backups and temp files never show up
    for noise in [".vim.md.swp", "a.md~", "x.tmp", "#e.md#", ".syncthing.n.md.tmp"]:
        write(docs / noise, "kilo")
    assert_matches_rebuild(d, kb, tmp_path)
    assert found(d, kb, "kilo") == []


def test_burst_of_5000_files(shared_daemon: Daemon, tmp_path: Path) -> None:
    d = shared_daemon
    kb = new_kb(d)
    docs = d.docs(kb)
    for i in range(5000):
        (docs / f"f{i:04d}.md").write_text(f"# File {i}\n\nburst token{i}")
    metrics = lambda: d.client.get(d.client.kb(kb, "/metrics"))  # noqa: E731
    wait_for(lambda: metrics()["documents"] == 5000, timeout=60)
    assert found(d, kb, "token4999") == ["f4999.md"]
    assert_matches_rebuild(d, kb, tmp_path)
    shutil.rmtree(docs)
    docs.mkdir()
    wait_for(lambda: metrics()["documents"] == 0, timeout=60)


def test_directory_rename_and_back(shared_daemon: Daemon, tmp_path: Path) -> None:
    d = shared_daemon
    kb = new_kb(d)
    docs = d.docs(kb)
    for i in range(20):
        write(docs / "projects" / "deep" / f"p{i}.md", f"# P{i}\n\nlima{i}")
    wait_for(lambda: found(d, kb, "lima7") == ["projects/deep/p7.md"])
    (docs / "projects").rename(docs / "archive")
    wait_for(lambda: found(d, kb, "lima7") == ["archive/deep/p7.md"])
    assert_matches_rebuild(d, kb, tmp_path)
    (docs / "archive").rename(docs / "projects")
    wait_for(lambda: found(d, kb, "lima7") == ["projects/deep/p7.md"])
    assert_matches_rebuild(d, kb, tmp_path)


def test_new_nested_folder_written_at_once(shared_daemon: Daemon, tmp_path: Path) -> None:
    d = shared_daemon
    kb = new_kb(d)
    nested = d.docs(kb) / "a" / "b" / "c"
    nested.mkdir(parents=True)
    for i in range(300):
        (nested / f"n{i}.md").write_text(f"mike{i}")
    wait_for(lambda: d.client.get(d.client.kb(kb, "/metrics"))["documents"] == 300, timeout=30)
    assert_matches_rebuild(d, kb, tmp_path)


def test_changes_while_stopped_are_picked_up_at_start(daemon: Daemon, tmp_path: Path) -> None:
    d = daemon
    docs = d.docs("notes")
    write(docs / "keep.md", "# Keep\n\nnovember")
    write(docs / "edit.md", "# Edit\n\noscar")
    write(docs / "gone.md", "# Gone\n\npapa")
    wait_for(lambda: d.client.get(d.client.kb("notes", "/metrics"))["documents"] == 3)
    assert d.stop() == 0
    write(docs / "edit.md", "# Edit\n\nquebec")
    (docs / "gone.md").unlink()
    write(docs / "new" / "added.md", "# Added\n\nromeo")
    d.start()
    wait_for(lambda: found(d, "notes", "romeo") == ["new/added.md"])
    assert found(d, "notes", "oscar") == [] and found(d, "notes", "papa") == []
    assert_matches_rebuild(d, "notes", tmp_path)


def test_disabled_kb_is_not_watched(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)
    d.client.post(f"/api/v1/resources/knowledge_base/{kb}/disable")
    write(d.docs(kb) / "quiet.md", "sierra")
    wait_for(lambda: d.settled(kb))
    assert d.dump(kb)["documents"] == []


def test_a_kb_folder_copied_in_is_adopted(shared_daemon: Daemon, tmp_path: Path) -> None:
    d = shared_daemon
    source = tmp_path / "elsewhere" / "travel"
    write(source / "kb.yaml", "config:\n  chunk_size: 128\n")
    write(source / "docs" / "kyoto.md", "# Kyoto\n\ntango temples")
    shutil.copytree(source, d.home / "knowledge" / "travel")
    wait_for(lambda: found(d, "travel", "temples") == ["kyoto.md"])
    assert d.client.get(d.client.kb("travel"))["config"]["chunk_size"] == 128


def test_a_kb_folder_filled_after_it_appears_is_adopted(shared_daemon: Daemon) -> None:
    """A sync tool makes the folder first and brings its files later: the folder is no
    KB when it appears, and whatever comes into it afterwards must still be seen."""
    d = shared_daemon
    name = "trip-" + uuid.uuid4().hex[:8]
    events = lambda: d.client.get("/api/v1/status")["watcher"]["events_seen"]  # noqa: E731
    seen = events()
    (d.home / "knowledge" / name).mkdir()
    # The folder's event is handled before its files come (unless it fell between two
    # watches of the shared daemon: then the next watch reads the folder whole).
    deadline = time.monotonic() + 5
    while events() <= seen and time.monotonic() < deadline:
        time.sleep(0.02)
    write(d.home / "knowledge" / name / "docs" / "lima.md", "# Lima\n\nceviche markets")
    wait_for(lambda: found(d, name, "ceviche") == ["lima.md"])


@pytest.mark.parametrize("_", [0])
def test_status_shows_watcher_state(shared_daemon: Daemon, _: Any) -> None:
    w = shared_daemon.client.get("/api/v1/status")["watcher"]
    assert w["healthy"] and w["restarts"] == 0 and w["last_full_reconcile_at"]
