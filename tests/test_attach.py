"""A folder of the user's, attached where it lives: indexed in place, never written by
indexing, never deleted with its knowledge base, and waited for while it is away."""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

import pytest

from cofferctl import cli
from cofferctl.client import ApiError
from tests.daemon import Daemon, wait_for
from tests.helpers import write


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
    assert (vault / f"{doc_id}.md").is_file() and not list(vault.glob(f"{doc_id}.html"))
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
