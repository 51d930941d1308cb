"""A folder of the user's, attached where it lives: indexed in place, never written by
indexing, never deleted with its knowledge base, and waited for while it is away."""

from __future__ import annotations

import hashlib
import io
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from cofferctl import cli
from cofferctl.client import ApiError
from tests.support.daemon import Daemon, cleanup, new_daemon, wait_for
from tests.support.helpers import write


def snapshot(folder: Path) -> dict[str, tuple[str, int]]:
    """Every entry under the folder (hidden ones too): content hash and mode."""
    found = {}
    for path in sorted(folder.rglob("*")):
        st = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        found[str(path.relative_to(folder))] = (digest, st.st_mode)
    return found


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    folder = tmp_path / "My Vault"
    write(folder / "plan.md", "---\ntags: [work]\n---\n# Plan\n\nThe heron project starts.")
    write(folder / "daily/2026-11-30.md", "# Monday\n\nMet about the heron budget.")
    write(folder / ".obsidian/workspace.json", '{"heron": true}')
    os.chmod(folder / "plan.md", 0o640)
    return folder


def found(d: Daemon, kb: str, query: str) -> list[str]:
    reply = d.client.post(d.client.kb(kb, "/search"), {"query": query})
    return sorted(p["path"] for p in reply["passages"])


def test_an_attached_folder_is_indexed_in_place_and_never_written(
    daemon: Daemon, vault: Path
) -> None:
    d = daemon
    before = snapshot(vault)
    out = io.StringIO()
    assert cli.main(["--socket", str(d.socket), "kb", "create", "vault", "--path", str(vault)],
                    stdout=out) == 0  # fmt: skip
    assert f"attached {vault}" in out.getvalue()
    expected = [str(vault / "daily/2026-11-30.md"), str(vault / "plan.md")]
    wait_for(lambda: found(d, "vault", "heron") == expected)
    kb = d.client.get(d.client.kb("vault"))
    assert kb["attached"] == str(vault)
    status = {k["name"]: k for k in d.client.get("/api/v1/status")["knowledge_bases"]}
    assert status["vault"]["attached"] and status["vault"]["docs_path"] == str(vault)
    assert (d.home / "knowledge/vault/kb.yaml").is_file()
    assert snapshot(vault) == before  # no settings, no hidden files, nothing renamed

    # a save in any editor is seen, through the watch that follows the folder
    write(vault / "ideas.md", "# Ideas\n\nA kingfisher logo.")
    wait_for(lambda: found(d, "vault", "kingfisher") == [str(vault / "ideas.md")])
    hits = d.client.post(d.client.kb("vault", "/grep"), {"pattern": "kingfisher"})["hits"]
    assert [h["path"] for h in hits] == [str(vault / "ideas.md")]

    # explicit writes land there, keeping the file's permissions
    doc = d.client.get(d.client.kb("vault", "/documents"), q="Plan")["documents"][0]
    assert doc["path"] == str(vault / "plan.md")
    d.client.request(
        "PUT",
        d.client.kb("vault", f"/documents/{doc['id']}"),
        {"content": "# Plan\n\nThe egret project starts."},
    )
    assert "egret" in (vault / "plan.md").read_text()
    assert (vault / "plan.md").stat().st_mode & 0o777 == 0o640

    # a converted document: its Markdown is written there (asked for), its original is not
    page = vault.parent / "report.html"
    page.write_text("<h1>Report</h1><p>the heron census</p>")
    added = d.client.post(d.client.kb("vault", "/documents"), {"source_path": str(page)})
    doc_id = added["document"]["id"]
    assert added["document"]["path"] == str(vault / "Report.md")  # named after its title
    assert (vault / "Report.md").is_file() and not list(vault.glob("*.html"))
    assert (d.home / "knowledge/vault/raw" / f"{doc_id}.html").is_file()

    # deleting the knowledge base leaves the folder as it is
    after_edit = snapshot(vault)
    out = io.StringIO()
    assert cli.main(["--socket", str(d.socket), "kb", "delete", "vault", "--yes"], stdout=out) == 0
    assert f"{vault} is untouched" in out.getvalue()
    assert snapshot(vault) == after_edit
    assert not (d.home / "knowledge/vault").exists()


def test_a_folder_that_goes_away_is_waited_for_not_emptied(daemon: Daemon, vault: Path) -> None:
    d = daemon
    d.client.post("/api/v1/knowledge_bases", {"name": "disk", "path": str(vault)})
    wait_for(lambda: len(found(d, "disk", "heron")) == 2)
    away = vault.with_name("unmounted")
    vault.rename(away)  # the disk is unplugged

    def state() -> str:
        kbs = d.client.get("/api/v1/status")["knowledge_bases"]
        return next(k["state"] for k in kbs if k["name"] == "disk")

    wait_for(lambda: state() == "unavailable")
    with pytest.raises(ApiError) as err:
        d.client.post(d.client.kb("disk", "/reindex"))  # a scan that cannot run says so
    assert str(vault) in err.value.message
    assert len(found(d, "disk", "heron")) == 2  # still searchable, nothing taken as deleted
    away.rename(vault)  # plugged in again
    wait_for(lambda: state() == "ok")
    write(vault / "back.md", "# Back\n\nThe heron returns.")
    wait_for(lambda: len(found(d, "disk", "heron")) == 3, timeout=20)
    assert (d.home / "knowledge/disk/docs").is_symlink()
    assert snapshot(vault)["back.md"]


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("relative/folder", "absolute"),
        ("/no/such/folder", "cannot be used"),
        ("{home}", "data home"),
        ("{home}/knowledge", "data home"),
        ("{vault}/plan.md", "not a folder"),
        ("{vault}/daily", "overlaps"),
    ],
)
def test_folders_that_cannot_be_attached_are_refused(
    daemon: Daemon, vault: Path, path: str, message: str
) -> None:
    d = daemon
    d.client.post("/api/v1/knowledge_bases", {"name": "first", "path": str(vault)})
    with pytest.raises(ApiError) as err:
        d.client.post(
            "/api/v1/knowledge_bases",
            {"name": "second", "path": path.format(home=d.home, vault=vault)},
        )
    assert err.value.code == "VALIDATION_ERROR" and message in err.value.message
    assert err.value.details["field"] == "path"
    assert not (d.home / "knowledge/second").exists()


def kb_status(d: Daemon, kb: str) -> dict[str, Any]:
    return next(k for k in d.client.get("/api/v1/status")["knowledge_bases"] if k["name"] == kb)


def states_for(d: Daemon, kb: str, seconds: float) -> list[str]:
    """The KB's state, read every few milliseconds for `seconds`."""
    seen = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        seen.append(kb_status(d, kb)["state"])
        time.sleep(0.02)
    return seen


def test_a_folder_away_is_one_problem_and_back_is_ok_at_once(tmp_path: Path, vault: Path) -> None:
    d = new_daemon(tmp_path).start("--reconcile-interval", "1")  # every pass meets it away
    try:
        d.client.post("/api/v1/knowledge_bases", {"name": "disk", "path": str(vault)})
        wait_for(lambda: len(found(d, "disk", "heron")) == 2)
        vault.rename(vault.with_name("unmounted"))

        away = states_for(d, "disk", 3.0)
        assert set(away) == {"unavailable"}  # never "failing": nothing fails but the folder
        entry = kb_status(d, "disk")
        assert entry["problems"] == [entry["problem"]]  # said once
        assert "unavailable" in entry["problem"] and f"{vault} is missing" in entry["problem"]
        out = io.StringIO()
        assert cli.main(["--socket", str(d.socket), "status"], stdout=out) == 0
        assert [line for line in out.getvalue().splitlines() if line.startswith("disk:")] == [
            f"disk: problem: {entry['problem']}"
        ]
        with pytest.raises(ApiError) as err:  # a document read says why, not "not found"
            d.client.get(d.client.document("disk", "plan.md"))
        assert (err.value.code, err.value.message) == ("KB_UNAVAILABLE", entry["problem"])
        assert len(found(d, "disk", "heron")) == 2  # while search still finds it

        vault.with_name("unmounted").rename(vault)
        back = states_for(d, "disk", 2.5)
        assert "failing" not in back and back[-1] == "ok"
        assert d.client.get(d.client.document("disk", "plan.md"))["title"] == "Plan"
    finally:
        cleanup(d)


def test_every_path_shown_is_under_the_folder_attached(
    daemon: Daemon, vault: Path, tmp_path: Path
) -> None:
    d = daemon
    write(vault / "areas/cooking/ramen.md", "# Ramen\n\nA rich broth.")
    (vault / "binary.md").write_bytes(b"\0" * 512)
    d.client.post("/api/v1/knowledge_bases", {"name": "vault", "path": str(vault)})
    wait_for(lambda: found(d, "vault", "broth"))
    # moved into a synced folder, a link left where it was: still the folder attached
    moved = tmp_path / "Sync" / "My Vault"
    moved.parent.mkdir()
    vault.rename(moved)
    vault.symlink_to(moved)

    def mine(path: str) -> bool:
        return path.startswith(f"{vault}/")

    hits = d.client.post(d.client.kb("vault", "/grep"), {"pattern": "broth"})["hits"]
    assert [h["path"] for h in hits] == [str(vault / "areas/cooking/ramen.md")]
    skipped = wait_for(lambda: d.client.get(d.client.kb("vault", "/skipped"))["items"])
    assert [s["path"] for s in skipped] == [str(vault / "binary.md")]
    assert kb_status(d, "vault")["docs_path"] == str(vault)

    deleted = d.client.request("DELETE", d.client.document("vault", "areas/cooking/ramen.md"))
    write(moved / "areas/cooking/ramen.md", "# Ramen\n\nWritten again meanwhile.")
    with pytest.raises(ApiError) as err:
        d.client.post(d.client.kb("vault", f"/trash/{deleted['trash']['id']}/restore"))
    assert err.value.code == "PATH_OCCUPIED"
    assert err.value.details["path"] == str(vault / "areas/cooking/ramen.md")
    assert f"a file is at {vault}/areas/cooking/ramen.md;" in err.value.message
    manifest = d.home / "trash/vault" / deleted["trash"]["id"] / "manifest.json"
    assert all(mine(path) for path in json.loads(manifest.read_text())["moved"].values())


def test_added_documents_are_named_placed_and_permitted_as_the_users(
    daemon: Daemon, vault: Path
) -> None:
    d = daemon
    write(vault / "ramen.md", "# ramen\n\nmy own note")
    vault.chmod(0o750)  # a file of theirs made here would be 0640
    d.client.post("/api/v1/knowledge_bases", {"name": "vault", "path": str(vault)})
    page = vault.parent / "q3.html"
    page.write_text("<h1>Q3 report: final?</h1><p>the heron census</p>")
    out = io.StringIO()
    argv = ["--socket", str(d.socket), "add", "vault", str(page), "--to", "Inbox/"]
    assert cli.main(argv, stdout=out) == 0
    added = vault / "Inbox" / "Q3 report final.md"  # its title, as every system holds it
    assert added.is_file() and str(added) in out.getvalue()
    assert mode(added) == 0o640 and mode(added.parent) == 0o750  # as theirs, not 0600/0700
    doc = d.client.get(d.client.document("vault", "Inbox/Q3 report final.md"))

    # converted again, it is written where it is, as it is
    page.write_text("<h1>Q3 report: final?</h1><p>the egret census</p>")
    again = d.client.post(d.client.document("vault", doc["id"], "/update-source"))
    assert again["document"]["id"] == doc["id"] and again["document"]["path"] == str(added)
    assert "egret" in added.read_text() and mode(added) == 0o640

    # a name taken in any case is not used; the knowledge base's own folder for adds
    note = {"content": "# Ramen\n\nfrom an agent"}
    first = d.client.post(d.client.kb("vault", "/documents"), note)["document"]
    assert first["path"] == str(vault / "Ramen 2.md")
    assert cli.main(["--socket", str(d.socket), "kb", "set", "vault", "add_folder=Clippings"],
                    stdout=io.StringIO()) == 0  # fmt: skip
    second = d.client.post(d.client.kb("vault", "/documents"), note)["document"]
    assert second["path"] == str(vault / "Clippings" / "Ramen.md")
    top = d.client.post(d.client.kb("vault", "/documents"), {**note, "folder": ""})["document"]
    assert top["path"] == str(vault / "Ramen 3.md")

    for folder in ("../elsewhere", "/etc", ".obsidian"):
        with pytest.raises(ApiError) as err:
            d.client.post(d.client.kb("vault", "/documents"), {**note, "folder": folder})
        assert err.value.code == "VALIDATION_ERROR" and err.value.details["field"] == "folder"
    assert not (vault.parent / "elsewhere").exists()


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_startup_is_done_once_every_kb_was_tried_even_with_a_folder_away(
    tmp_path: Path, vault: Path
) -> None:
    """`startup_reconcile_done` says every knowledge base was tried: one whose folder is
    away is tried (and says why), not waited for until it comes back."""
    d = new_daemon(tmp_path).start()
    try:
        d.client.post("/api/v1/knowledge_bases", {"name": "disk", "path": str(vault)})
        wait_for(lambda: len(found(d, "disk", "heron")) == 2)
        d.stop()
        vault.rename(vault.with_name("unmounted"))
        d.start()
        wait_for(lambda: d.client.get("/api/v1/status")["startup_reconcile_done"], timeout=30)
        assert kb_status(d, "disk")["state"] == "unavailable"
    finally:
        cleanup(d)
