"""Deleting moves a document to its knowledge base's trash in the data home; restoring puts
it back with the same path and id and indexes it at once; expired entries are purged."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cofferctl.client import ApiError
from cofferd.surfaces.http.error_envelope import status_of
from tests.support.daemon import Daemon, cleanup, new_daemon, wait_for
from tests.support.helpers import new_kb, search, write
from tests.support.samples import make_pdf

SHM = "/dev/shm"


def delete(d: Daemon, kb: str, doc_id: str) -> dict[str, Any]:
    result: dict[str, Any] = d.client.request("DELETE", d.client.kb(kb, f"/documents/{doc_id}"))
    return result


def trash(d: Daemon, kb: str) -> dict[str, Any]:
    result: dict[str, Any] = d.client.get(d.client.kb(kb, "/trash"))
    return result


def restore(d: Daemon, kb: str, trash_id: str) -> dict[str, Any]:
    result: dict[str, Any] = d.client.post(d.client.kb(kb, f"/trash/{trash_id}/restore"))
    return result["restored"]


def indexed(d: Daemon, kb: str, path: Path, word: str) -> dict[str, Any]:
    """The document at `path` once a search for `word` finds it."""
    wait_for(lambda: search(d, kb, word))
    doc: dict[str, Any] = d.client.get(d.client.kb(kb, "/documents"))["documents"][0]
    assert doc["path"] == str(path)
    return doc


def snapshot(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def test_delete_lists_and_restores_the_same_document(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)
    path = write(d.docs(kb) / "plans/2026/plan.md", "# Plan\n\nThe quokka project.\n")
    path.chmod(0o640)
    data = path.read_bytes()
    doc = indexed(d, kb, path, "quokka")

    reply = delete(d, kb, doc["id"])
    assert reply["deleted"] == {"id": doc["id"], "relative_path": "plans/2026/plan.md"}
    entry = reply["trash"]
    assert entry["restore"] == f"cofferctl restore {kb} {entry['id']}"
    assert not path.exists() and not search(d, kb, "quokka")
    assert list((d.home / "trash" / kb).iterdir()) == [d.home / "trash" / kb / entry["id"]]
    listed = trash(d, kb)
    assert listed["retention_days"] == 30
    [item] = listed["items"]
    assert item["id"] == entry["id"] and item["expires_at"] == entry["expires_at"]
    assert (item["document_id"], item["relative_path"], item["title"]) == (
        doc["id"], "plans/2026/plan.md", "Plan"
    )  # fmt: skip
    assert item["has_original"] is False

    path.parent.rmdir()  # its folder went too: restoring makes it again
    restored = restore(d, kb, entry["id"])
    assert restored["id"] == doc["id"] and restored["path"] == str(path)
    assert "quokka" in restored["content"]
    assert path.read_bytes() == data and (path.stat().st_mode & 0o777) == 0o640
    assert search(d, kb, "quokka")  # indexed at once: no waiting for the watcher
    assert trash(d, kb)["items"] == []
    assert not list((d.home / "trash" / kb).iterdir())
    events = [e["event"] for e in d.client.get("/api/v1/audit", kb=kb)["events"]]
    assert {"kb_document_trashed", "kb_document_restored"} <= set(events)


def test_restore_never_overwrites_a_file_at_that_path(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)
    path = write(d.docs(kb) / "notes.md", "# Notes\n\nThe first wombat.\n")
    doc = indexed(d, kb, path, "wombat")
    trash_id = delete(d, kb, doc["id"])["trash"]["id"]
    write(path, "# Notes\n\nA new numbat, written since.\n")

    with pytest.raises(ApiError) as err:
        restore(d, kb, trash_id)
    assert (status_of(err.value), err.value.code) == (409, "PATH_OCCUPIED")
    assert err.value.details["path"] == str(path)
    assert "numbat" in path.read_text()
    assert [i["id"] for i in trash(d, kb)["items"]] == [trash_id]  # still restorable

    path.unlink()
    assert "wombat" in restore(d, kb, trash_id)["content"]


def test_a_converted_document_comes_back_with_its_original(
    shared_daemon: Daemon, tmp_path: Path
) -> None:
    d = shared_daemon
    kb = new_kb(d)
    source = tmp_path / "report.pdf"
    source.write_bytes(make_pdf("the pangolin report"))
    doc = d.client.post(d.client.kb(kb, "/documents"), {"source_path": str(source)})["document"]
    raw = d.home / "knowledge" / kb / "raw" / f"{doc['id']}.pdf"
    original = raw.read_bytes()

    trash_id = delete(d, kb, doc["id"])["trash"]["id"]
    assert not raw.exists() and not Path(doc["path"]).exists()
    assert trash(d, kb)["items"][0]["has_original"] is True

    restored = restore(d, kb, trash_id)
    assert restored["id"] == doc["id"] and restored["title"] == doc["title"]
    assert raw.read_bytes() == original
    assert search(d, kb, "pangolin")
    report = d.client.post(d.client.kb(kb, "/check-sources"))
    assert [e["document_id"] for e in report["unchanged"]] == [doc["id"]]  # tracked again
    again = d.client.post(d.client.kb(kb, f"/documents/{doc['id']}/reconvert"))
    assert again["document"]["id"] == doc["id"]  # the original is usable


@pytest.fixture(params=["same_filesystem", "other_filesystem"])
def vault(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A folder to attach: beside the data home, or on another filesystem (tmpfs), where
    files are copied durably and then removed instead of renamed."""
    if request.param == "same_filesystem":
        yield tmp_path / "vault"
        return
    if not os.path.isdir(SHM) or os.stat(SHM).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip(f"{SHM} is not another filesystem here")
    folder = Path(tempfile.mkdtemp(prefix="coffer-vault-", dir=SHM))
    try:
        yield folder / "vault"
    finally:
        shutil.rmtree(folder)


def test_an_attached_folder_keeps_no_trash(daemon: Daemon, vault: Path) -> None:
    d = daemon
    write(vault / "keep.md", "# Keep\n\nThe heron stays.\n")
    path = write(vault / "ideas/idea.md", "# Idea\n\nA kingfisher logo.\n")
    path.chmod(0o640)
    mtime = path.stat().st_mtime_ns
    d.client.post("/api/v1/knowledge_bases", {"name": "vault", "path": str(vault)})
    wait_for(lambda: search(d, "vault", "kingfisher"))
    doc = d.client.get(d.client.kb("vault", "/documents"), q="Idea")["documents"][0]
    before = snapshot(vault)

    trash_id = delete(d, "vault", doc["id"])["trash"]["id"]
    assert snapshot(vault) == {"keep.md": before["keep.md"]}  # moved out; nothing left there
    kept = d.home / "trash" / "vault" / trash_id / "document.md"
    assert hashlib.sha256(kept.read_bytes()).hexdigest() == before["ideas/idea.md"]

    assert restore(d, "vault", trash_id)["path"] == str(path)
    assert snapshot(vault) == before
    assert (path.stat().st_mode & 0o777, path.stat().st_mtime_ns) == (0o640, mtime)
    assert search(d, "vault", "kingfisher")


def test_unknown_trash_entries_are_404(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)
    for trash_id in ("01JZZZZZZZZZZZZZZZZZZZZZZZ", "nothing", "..%2F..%2Fkb"):
        with pytest.raises(ApiError) as err:
            restore(d, kb, trash_id)
        assert (status_of(err.value), err.value.code) == (404, "TRASH_ENTRY_NOT_FOUND")
        assert err.value.message
    path = write(d.docs(kb) / "once.md", "# Once\n\nA single ibex.\n")
    trash_id = delete(d, kb, indexed(d, kb, path, "ibex")["id"])["trash"]["id"]
    restore(d, kb, trash_id)
    with pytest.raises(ApiError) as err:
        restore(d, kb, trash_id)  # restored already
    assert err.value.code == "TRASH_ENTRY_NOT_FOUND"


def test_expired_entries_are_purged(tmp_path: Path) -> None:
    d = new_daemon(tmp_path)
    try:
        d.start()
        kb = new_kb(d)
        for word in ("tapir", "okapi"):
            path = write(d.docs(kb) / f"{word}.md", f"# {word}\n\nThe {word}.\n")
            delete(d, kb, indexed(d, kb, path, word)["id"])
        entries = d.home / "trash" / kb
        assert len(list(entries.iterdir())) == 2
        d.stop()

        d.start(COFFER_TRASH_RETENTION_DAYS="0")  # a restart purges what has expired
        wait_for(lambda: not list(entries.iterdir()))
        assert trash(d, kb) == {
            "retention_days": 0,
            "items": [],
            "total": 0,
            "limit": 50,
            "offset": 0,
        }

        # an entry that expires at once is never listed nor restorable
        path = write(d.docs(kb) / "brief.md", "# Brief\n\nA brief serval.\n")
        trash_id = delete(d, kb, indexed(d, kb, path, "serval")["id"])["trash"]["id"]
        assert trash(d, kb)["items"] == []
        with pytest.raises(ApiError) as err:
            restore(d, kb, trash_id)
        assert err.value.code == "TRASH_ENTRY_NOT_FOUND"
        events = [e["event"] for e in d.client.get("/api/v1/audit", kb=kb)["events"]]
        assert events.count("kb_trash_purged") == 3

        # deleting a knowledge base removes its trash too
        path = write(d.docs(kb) / "last.md", "# Last\n\nThe last aye-aye.\n")
        d.stop()
        d.start()
        delete(d, kb, indexed(d, kb, path, "aye")["id"])
        assert list(entries.iterdir())
        d.client.request("DELETE", d.client.kb(kb))
        assert not entries.exists()
    finally:
        cleanup(d)
