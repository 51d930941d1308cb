"""One boundary for every file Coffer touches: KB folders that arrive by sync or copy are
adopted only as attaching would adopt them, attached folders are checked again at every
use, and control files that are not regular files never stall or empty an index."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from cofferctl.client import ApiError
from tests.support.cli import ctl
from tests.support.daemon import Daemon, wait_for
from tests.support.file_trees import tree_state
from tests.support.helpers import assert_matches_rebuild, write


def kb_status(d: Daemon, kb: str) -> dict[str, Any]:
    kbs = d.client.get("/api/v1/status")["knowledge_bases"]
    return next((k for k in kbs if k["name"] == kb), {"state": "not there yet"})


def paths_found(d: Daemon, kb: str, query: str) -> list[str]:
    reply = d.client.post(d.client.kb(kb, "/search"), {"query": query, "top_k": 50})
    return sorted(p["relative_path"] for p in reply["passages"])


def everywhere(d: Daemon, query: str) -> list[tuple[str, str]]:
    reply = d.client.post("/api/v1/search", {"query": query, "top_k": 50})
    return sorted((p["knowledge_base"], p["relative_path"]) for p in reply["passages"])


@pytest.fixture
def two(daemon: Daemon, tmp_path: Path) -> Daemon:
    """A daemon with `notes` (its own folder) and `vault` (attached), both indexed."""
    d = daemon
    write(d.docs("notes") / "otter.md", "# Otter\n\nThe otter swims.")
    vault = tmp_path / "vault"
    write(vault / "heron.md", "# Heron\n\nThe heron waits.")
    d.client.post("/api/v1/knowledge_bases", {"name": "vault", "path": str(vault)})
    wait_for(lambda: paths_found(d, "notes", "otter") == ["otter.md"])
    wait_for(lambda: paths_found(d, "vault", "heron") == ["heron.md"])
    return d


def synced_in(d: Daemon, name: str, target: str) -> Path:
    """A KB folder as a sync brings it: its docs a link this machine never made."""
    folder = d.home / "knowledge" / name
    folder.mkdir(parents=True)
    (folder / "kb.yaml").write_text("kind: knowledge_base\nconfig: {}\n")
    (folder / "docs").symlink_to(target)
    return folder


@pytest.mark.parametrize("target", ["../..", "../../knowledge/notes/docs", "{outside}"])
def test_a_synced_docs_link_is_not_followed_and_every_other_kb_is_still_served(
    two: Daemon, tmp_path: Path, target: str
) -> None:
    d = two
    outside = tmp_path / "elsewhere"
    write(outside / "secret.md", "# Secret\n\nThe otter ledger.")
    before = {"outside": tree_state(outside), "notes": tree_state(d.docs("notes"))}
    synced_in(d, "evil", target.format(outside=outside))
    wait_for(
        lambda: any(k["name"] == "evil" for k in d.client.get("/api/v1/status")["knowledge_bases"])
    )
    evil = wait_for(lambda: (k := kb_status(d, "evil"))["state"] == "unavailable" and k)
    assert "not attached on this machine" in " ".join(evil["problems"])
    assert "cofferctl kb attach evil" in " ".join(evil["problems"])
    # the watcher keeps serving every other KB, and nothing of the link is indexed
    write(d.docs("notes") / "later.md", "# Later\n\nAnother otter.")
    write(tmp_path / "vault/egret.md", "# Egret\n\nThe heron's cousin.")
    wait_for(lambda: paths_found(d, "notes", "otter") == ["later.md", "otter.md"])
    wait_for(lambda: paths_found(d, "vault", "heron") == ["egret.md", "heron.md"])
    assert paths_found(d, "evil", "otter") == []
    assert everywhere(d, "otter") == [("notes", "later.md"), ("notes", "otter.md")]
    with pytest.raises(ApiError) as err:
        d.client.post(d.client.kb("evil", "/documents"), {"content": "# Planted\n\nhere"})
    assert err.value.code == "KB_UNAVAILABLE"
    assert d.client.get("/api/v1/status")["watcher"]["healthy"]
    assert tree_state(outside) == before["outside"]
    assert tree_state(d.docs("notes")).keys() - before["notes"].keys() == {
        str(d.docs("notes") / "later.md")
    }
    assert_matches_rebuild(d, "notes", tmp_path)


@pytest.mark.parametrize("swap_to", ["home", "other kb"])
def test_an_attached_folder_swapped_for_a_link_makes_the_kb_unavailable(
    two: Daemon, tmp_path: Path, swap_to: str
) -> None:
    d = two
    vault = tmp_path / "vault"
    target = d.home if swap_to == "home" else d.docs("notes")
    doc = d.client.get(d.client.kb("vault", "/documents"))["documents"][0]
    vault.rename(tmp_path / "vault-moved")
    vault.symlink_to(target)  # the user's folder is now a link into Coffer's own files
    before = tree_state(d.home)
    wait_for(lambda: kb_status(d, "vault")["state"] == "unavailable")
    assert "not the one attached" in " ".join(kb_status(d, "vault")["problems"])
    for call in (
        lambda: d.client.post(d.client.kb("vault", "/documents"), {"content": "# New\n\nx"}),
        lambda: d.client.request(
            "PUT", d.client.kb("vault", f"/documents/{doc['id']}"), {"content": "# Changed\n\ny"}
        ),
        lambda: d.client.request("DELETE", d.client.kb("vault", f"/documents/{doc['id']}")),
        lambda: d.client.post(d.client.kb("vault", "/reindex")),
        lambda: d.client.post(d.client.kb("vault", "/grep"), {"pattern": "otter"}),
    ):
        with pytest.raises(ApiError) as err:
            call()
        assert err.value.code == "KB_UNAVAILABLE"
    write(d.docs("notes") / "after.md", "# After\n\nThe otter again.")
    wait_for(lambda: paths_found(d, "notes", "otter") == ["after.md", "otter.md"])
    assert paths_found(d, "vault", "otter") == []  # never indexed through the link
    changed = {k for k, v in tree_state(d.home).items() if before.get(k) != v}
    assert all("coffer.db" in k or k.endswith("after.md") for k in changed), changed
    assert_matches_rebuild(d, "notes", tmp_path)


def test_a_kb_folder_that_is_a_link_or_badly_named_is_skipped_with_its_reason(
    two: Daemon, tmp_path: Path
) -> None:
    d = two
    elsewhere = tmp_path / "linked-kb"
    write(elsewhere / "docs/owl.md", "# Owl\n\nThe owl hoots.")
    (d.home / "knowledge/linked").symlink_to(elsewhere)
    write(d.home / "knowledge/Bad Name/docs/owl.md", "# Owl\n\nAnother owl.")
    write(d.home / "knowledge/bad\x1b[2J/docs/owl.md", "# Owl\n\nA third owl.")

    def refused() -> dict[str, str]:
        found = d.client.get("/api/v1/status")["refused_folders"]
        return {f["name"]: f["reason"] for f in found}

    wait_for(lambda: len(refused()) == 3)
    assert "is a link" in refused()["linked"]
    assert "not a knowledge base name" in refused()["Bad Name"]
    assert [k["name"] for k in d.client.get("/api/v1/status")["knowledge_bases"]] == [
        "notes",
        "vault",
    ]
    assert everywhere(d, "owl") == []
    assert everywhere(d, "otter") == [("notes", "otter.md")]
    assert not (elsewhere / "raw").exists() and not (elsewhere / "kb.yaml").exists()


@pytest.mark.parametrize("shape", ["folder", "fifo", "link", "subfolder"])
def test_an_ignore_file_that_is_not_a_regular_file_is_reported_not_obeyed(
    two: Daemon, tmp_path: Path, shape: str
) -> None:
    d = two
    docs = d.docs("notes")
    write(docs / "sub/badger.md", "# Badger\n\nThe badger digs.")
    wait_for(lambda: paths_found(d, "notes", "badger") == ["sub/badger.md"])
    where = docs / ("sub/.cofferignore" if shape == "subfolder" else ".gitignore")
    if shape in ("folder", "subfolder"):
        where.mkdir()
    elif shape == "fifo":
        os.mkfifo(where)
    else:
        write(tmp_path / "rules", "*.md\n")
        where.symlink_to(tmp_path / "rules")
    reply = d.client.post(d.client.kb("notes", "/reindex"))  # answers: a FIFO never blocks
    assert reply is not None
    added = d.client.post(d.client.kb("notes", "/documents"), {"content": "# Stoat\n\nstoat"})
    assert added["status"] == "added"
    assert paths_found(d, "notes", "badger") == ["sub/badger.md"]
    assert paths_found(d, "notes", "otter") == ["otter.md"]
    skipped = d.client.get(d.client.kb("notes", "/skipped"))["items"]
    reasons = {s["relative_path"]: s["reason"] for s in skipped}
    relpath = str(where.relative_to(docs))
    assert "not a regular file" in reasons[relpath] and "not applied" in reasons[relpath]
    grep = d.client.post(d.client.kb("notes", "/grep"), {"pattern": "badger"})
    assert [h["relative_path"] for h in grep["hits"]] == ["sub/badger.md"]
    assert_matches_rebuild(d, "notes", tmp_path)


def test_an_oversized_ignore_file_is_applied_up_to_its_bound_and_reported(
    two: Daemon, tmp_path: Path
) -> None:
    d = two
    docs = d.docs("notes")
    write(docs / "late.md", "# Late\n\nThe otter is late.")
    write(docs / ".gitignore", "# padding\n" * 120_000 + "late.md\n")  # 1.2 MB
    d.client.post(d.client.kb("notes", "/reindex"))
    skipped = {
        s["relative_path"]: s["reason"]
        for s in d.client.get(d.client.kb("notes", "/skipped"))["items"]
    }
    assert "only the rules in its first MB" in skipped.get(".gitignore", ""), skipped
    assert "late.md" in paths_found(d, "notes", "otter")  # its last rule is past the bound


def test_an_ignore_file_that_cannot_be_read_keeps_its_folder_as_it_was(
    two: Daemon, tmp_path: Path
) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads every file")
    d = two
    docs = d.docs("notes")
    write(docs / "sub/mole.md", "# Mole\n\nThe mole digs.")
    wait_for(lambda: paths_found(d, "notes", "mole") == ["sub/mole.md"])
    rules = write(docs / "sub/.ignore", "mole.md\n")
    rules.chmod(0)
    try:
        d.client.post(d.client.kb("notes", "/reindex"))
        skipped = {
            s["relative_path"]: s["reason"]
            for s in d.client.get(d.client.kb("notes", "/skipped"))["items"]
        }
        assert "cannot be read" in skipped["sub/.ignore"]
        assert paths_found(d, "notes", "mole") == ["sub/mole.md"]  # not taken as gone
    finally:
        rules.chmod(0o644)
    d.client.post(d.client.kb("notes", "/reindex"))
    assert paths_found(d, "notes", "mole") == []  # readable again: obeyed


@pytest.mark.parametrize("shape", ["fifo", "folder"])
def test_settings_files_that_are_not_regular_files_never_stall_the_daemon(
    two: Daemon, shape: str
) -> None:
    d = two
    settings = d.home / "knowledge/notes/kb.yaml"
    settings.unlink()
    if shape == "fifo":
        os.mkfifo(settings)
    else:
        settings.mkdir()
    problems = wait_for(lambda: " ".join(kb_status(d, "notes")["problems"]))
    assert "not a regular file" in problems
    d.client.post(d.client.kb("notes", "/reindex"))
    assert paths_found(d, "notes", "otter") == ["otter.md"]


def test_a_tracked_source_repointed_at_a_system_file_is_not_read(
    shared_daemon: Daemon, tmp_path: Path
) -> None:
    d = shared_daemon
    source = write(tmp_path / "report.txt", "The quarterly walrus report.")
    added = d.client.post(
        d.client.kb("notes", "/documents"), {"source_path": str(source), "replace": True}
    )
    doc_id = added["document"]["id"]
    source.unlink()
    source.symlink_to("/etc/passwd")
    report = d.client.post(d.client.kb("notes", "/check-sources"))
    entry = next(e for e in report["unreachable"] if e["document_id"] == doc_id)
    assert "symlink" in entry["note"]
    with pytest.raises(ApiError) as err:
        d.client.post(d.client.kb("notes", f"/documents/{doc_id}/update-source"))
    assert err.value.code == "PATH_REFUSED"
    assert paths_found(d, "notes", "root") == []


@pytest.mark.parametrize("where", ["hidden", "link"])
def test_add_by_path_refuses_hidden_and_linked_files(
    shared_daemon: Daemon, tmp_path: Path, where: str
) -> None:
    d = shared_daemon
    real = write(tmp_path / "plain.md", "# Plain\n\nplain")
    given = (
        write(tmp_path / ".private/keys.md", "# Keys\n\nsecret")
        if where == "hidden"
        else (tmp_path / "alias.md")
    )
    if where == "link":
        given.symlink_to(real)
    with pytest.raises(ApiError) as err:
        d.client.post(d.client.kb("notes", "/documents"), {"source_path": str(given)})
    assert err.value.code == "PATH_REFUSED"


def test_cofferctl_add_applies_the_same_source_rules(shared_daemon: Daemon, tmp_path: Path) -> None:
    d = shared_daemon
    real = write(tmp_path / "plain.md", "# Plain\n\nThe narwhal plain.")
    hidden = write(tmp_path / ".config/keys.md", "# Keys\n\nThe narwhal key.")
    link = tmp_path / "alias.md"
    link.symlink_to(real)
    before = len(d.client.get(d.client.kb("notes", "/documents"))["documents"])
    result = ctl(d, "--json", "add", "notes", str(hidden), str(link))
    assert result.returncode == 1, result.stderr
    rejected = {r["path"]: r for r in json.loads(result.stdout)["results"]}
    assert "hidden" in rejected[str(hidden)]["message"]
    assert "symlink" in rejected[str(link)]["message"]
    assert {r["status"] for r in rejected.values()} == {"rejected"}
    assert len(d.client.get(d.client.kb("notes", "/documents"))["documents"]) == before
    assert paths_found(d, "notes", "narwhal") == []


def test_kb_attach_on_the_command_line(two: Daemon, tmp_path: Path) -> None:
    d = two
    outside = tmp_path / "field-notes"
    write(outside / "ibis.md", "# Ibis\n\nThe ibis probes.")
    synced_in(d, "field", str(outside))
    wait_for(lambda: kb_status(d, "field")["state"] == "unavailable")
    status = ctl(d, "status")
    assert "cofferctl kb attach field" in status.stdout
    result = ctl(d, "kb", "attach", "field")
    assert result.returncode == 0, result.stderr
    assert f"attached {outside} as field" in result.stdout
    wait_for(lambda: paths_found(d, "field", "ibis") == ["ibis.md"])
    wait_for(lambda: kb_status(d, "field")["state"] == "ok")  # its pass may still be ending
    moved = tmp_path / "moved"
    write(moved / "stork.md", "# Stork\n\nThe stork nests.")
    result = ctl(d, "kb", "attach", "field", str(moved))
    assert result.returncode == 0, result.stderr
    wait_for(lambda: paths_found(d, "field", "stork") == ["stork.md"])
    refused = ctl(d, "kb", "attach", "field", str(d.home / "knowledge"))
    assert refused.returncode != 0 and "data home" in refused.stderr


@pytest.mark.parametrize(
    "manifest",
    [
        b'{"id": 5}',
        b"[1, 2]",
        b"\xff\xfe not json",
        b'{"id": "%s", "document_id": "d", "relative_path": "../../escape.md", "title": "t",'
        b' "deleted_at": "2026-01-01T00:00:00+00:00"}',
        b'{"id": "%s", "document_id": "d", "relative_path": "a.md", "title": "t",'
        b' "deleted_at": "not a date"}',
        b'{"id": "%s", "document_id": "d", "relative_path": "a.md", "title": ["t"],'
        b' "deleted_at": "2026-01-01T00:00:00"}',
        b'{"id": "01J00000000000000000000000", "document_id": "d", "relative_path": "a.md",'
        b' "title": "t", "deleted_at": "2026-01-01T00:00:00+00:00"}',
        "fifo",
    ],
)
def test_a_trash_entry_whose_manifest_is_damaged_is_left_alone(
    shared_daemon: Daemon, manifest: bytes | str
) -> None:
    d = shared_daemon
    trash_id = "01JZZZZZZZZZZZZZZZZZZZZZZZ"
    folder = d.home / "trash/notes" / trash_id
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "manifest.json"
    path.unlink(missing_ok=True)
    if manifest == "fifo":
        os.mkfifo(path)
    else:
        assert isinstance(manifest, bytes)
        path.write_bytes(manifest.replace(b"%s", trash_id.encode()))
    listed = d.client.get(d.client.kb("notes", "/trash"))
    assert trash_id not in [e["id"] for e in listed["items"]]
    with pytest.raises(ApiError) as err:
        d.client.post(d.client.kb("notes", f"/trash/{trash_id}/restore"))
    assert err.value.code == "TRASH_ENTRY_NOT_FOUND"
    assert folder.is_dir()  # left as it is, for the user to look at


def test_folders_attached_before_identities_were_recorded_stay_attached(
    two: Daemon, tmp_path: Path
) -> None:
    d = two
    assert d.stop() == 0
    (d.home / "local/vault.attached.json").unlink()  # as a data home from before
    (d.home / "local/.attachments-recorded").unlink()
    write(tmp_path / "synced/puffin.md", "# Puffin\n\nThe puffin dives.")
    synced_in(d, "brought", str(tmp_path / "synced"))  # arrived while it was stopped
    d.start()
    wait_for(lambda: kb_status(d, "brought")["state"] == "unavailable")
    wait_for(lambda: kb_status(d, "vault")["state"] == "ok")  # its first pass may be ending
    write(tmp_path / "vault/tern.md", "# Tern\n\nThe heron's neighbour.")
    wait_for(lambda: paths_found(d, "vault", "heron") == ["heron.md", "tern.md"])
    assert paths_found(d, "brought", "puffin") == []


def test_a_restore_through_a_folder_swapped_for_a_link_is_refused(
    two: Daemon, tmp_path: Path
) -> None:
    d = two
    docs = d.docs("notes")
    write(docs / "sub/lynx.md", "# Lynx\n\nThe lynx stalks.")
    wait_for(lambda: paths_found(d, "notes", "lynx") == ["sub/lynx.md"])
    trashed = d.client.request("DELETE", d.client.document("notes", "sub/lynx.md"))
    outside = tmp_path / "outside"
    outside.mkdir()
    (docs / "sub").rmdir()
    (docs / "sub").symlink_to(outside)  # a sync brings a link where the folder was
    with pytest.raises(ApiError) as err:
        d.client.post(d.client.kb("notes", f"/trash/{trashed['trash']['id']}/restore"))
    assert err.value.code == "PATH_REFUSED", err.value.message
    assert list(outside.iterdir()) == []  # nothing written outside the knowledge base
    assert [e["id"] for e in d.client.get(d.client.kb("notes", "/trash"))["items"]] == [
        trashed["trash"]["id"]
    ]  # still in the trash, whole
