"""Many devices, one folder, through the sync people already use: conflict copies are
listed, never doubled in search; two machines end up agreeing; nobody rewrites files."""

from __future__ import annotations

import hashlib
import io
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client as McpClient

from cofferctl import cli
from cofferd.domain.conflicts import conflict_copy, has_merge_markers
from cofferd.domain.models import KnowledgeBase
from cofferd.surfaces.core import Coffer
from tests.support.daemon import Daemon, cleanup, new_daemon, wait_for
from tests.support.helpers import write
from tests.support.mcp_client import call as mcp_call
from tests.support.mcp_client import params as mcp_params


@pytest.mark.parametrize(
    ("name", "original", "tool"),
    [
        ("a/plan.sync-conflict-20261130-101500-ABCDEFG.md", "a/plan.md", "syncthing"),
        ("plan.sync-conflict-20261130-101500.md", "plan.md", "syncthing"),
        ("plan (Ana's conflicted copy 2026-11-30).md", "plan.md", "dropbox"),
        ("x/plan (conflicted copy 2026-11-30 101500).md", "x/plan.md", "nextcloud"),
    ],
)
def test_conflict_copies_are_known_by_name(name: str, original: str, tool: str) -> None:
    copy = conflict_copy(name)
    assert copy is not None and (copy.original, copy.tool) == (original, tool)


@pytest.mark.parametrize("name", ["plan.md", "plan (copy).md", "sync-conflict.md", "a (b).md"])
def test_other_names_are_not_conflict_copies(name: str) -> None:
    assert conflict_copy(name) is None


def test_merge_markers() -> None:
    assert has_merge_markers("x\n<<<<<<< HEAD\nmine\n=======\ntheirs\n>>>>>>> main\ny")
    assert not has_merge_markers("<<<<<<< a line that merely starts so\nno more")


async def test_copies_are_listed_not_indexed(coffer: Coffer, kb: KnowledgeBase, docs: Path) -> None:
    write(docs / "plan.md", "# Plan\n\nThe narwhal budget.")
    write(docs / "plan.sync-conflict-20261130-101500-ABCDEFG.md", "# Plan\n\nThe narwhal plan.")
    write(docs / "sub/todo (Ana's conflicted copy 2026-11-30).md", "narwhal todo, copy")
    write(docs / "merged.md", "# M\n\n<<<<<<< HEAD\nnarwhal A\n=======\nnarwhal B\n>>>>>>> x\n")
    await coffer.reindexer.reconcile(kb)
    found = await coffer.retrieval.search("notes", "narwhal")
    assert sorted(p.path for p in found.passages) == ["merged.md", "plan.md"]
    grepped = await coffer.retrieval.grep("notes", "narwhal")
    assert sorted({h.path for h in grepped.hits}) == ["merged.md", "plan.md"]
    plan = await coffer.documents.find("notes", "plan.md")
    conflicts, total = await coffer.documents.conflicts("notes")
    assert total == 3
    assert [(c["kind"], c["tool"], c["relative_path"], c["conflicts_with"], c["document_id"])
            for c in conflicts] == [
        ("sync_copy", "syncthing", "plan.sync-conflict-20261130-101500-ABCDEFG.md", "plan.md",
         plan.id),
        ("sync_copy", "dropbox", "sub/todo (Ana's conflicted copy 2026-11-30).md", "sub/todo.md",
         None),
        ("merge_markers", "git", "merged.md", "merged.md",
         (await coffer.documents.find("notes", "merged.md")).id),
    ]  # fmt: skip
    (docs / "plan.sync-conflict-20261130-101500-ABCDEFG.md").unlink()  # merged by hand
    await coffer.reindexer.reconcile(kb)
    assert (await coffer.documents.conflicts("notes"))[1] == 2
    page, total = await coffer.documents.conflicts("notes", limit=1, offset=1)
    assert total == 2 and [c["kind"] for c in page] == ["merge_markers"]


# -- two machines, one folder ------------------------------------------------------------


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)
    }


def _hashes(root: Path) -> dict[str, tuple[str, int]]:
    return {
        path: (hashlib.sha256(data).hexdigest(), (root / path).stat().st_mtime_ns)
        for path, data in _files(root).items()
    }


class Sync:
    """Two-way sync as Syncthing does it: a change on one side is copied to the other; a
    file changed on both sides keeps the newer version and the other as a conflict copy."""

    def __init__(self, a: Path, b: Path) -> None:
        self.a, self.b = a, b
        self.base: dict[str, str | None] = {}

    def __call__(self) -> None:
        ha, hb = _hashes(self.a), _hashes(self.b)
        for rel in sorted(set(ha) | set(hb)):
            va, vb = ha.get(rel), hb.get(rel)
            a_now, b_now = (va[0] if va else None), (vb[0] if vb else None)
            base = self.base.get(rel)
            if a_now == b_now:
                pass
            elif a_now != base and b_now != base and va and vb:  # changed on both sides
                newer, older = (self.a, self.b) if va[1] >= vb[1] else (self.b, self.a)
                stem, dot, ext = rel.rpartition(".")
                copy = f"{stem}.sync-conflict-20261202-120000-SYNCTST.{ext}" if dot else rel
                for side in (self.a, self.b):
                    shutil.copy2(older / rel, side / copy)
                shutil.copy2(newer / rel, older / rel)
            else:
                source, target = (self.a, self.b) if a_now != base else (self.b, self.a)
                if (source / rel).exists():
                    (target / rel).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(source / rel, target / rel)
                else:
                    (target / rel).unlink()
        assert _files(self.a) == _files(self.b)
        self.base = {rel: v[0] for rel, v in _hashes(self.a).items()}


@pytest.fixture
def two_daemons(tmp_path: Path) -> Iterator[tuple[Daemon, Daemon]]:
    for machine in ("one", "two"):
        (tmp_path / machine).mkdir()
    one, two = new_daemon(tmp_path / "one"), new_daemon(tmp_path / "two")
    try:
        yield one.start(), two.start()
    finally:
        cleanup(one)
        cleanup(two)


async def test_two_machines_share_a_folder_through_sync(
    two_daemons: tuple[Daemon, Daemon], tmp_path: Path
) -> None:
    one, two = two_daemons
    a, b = tmp_path / "laptop/Notes", tmp_path / "desktop/Notes"
    write(a / "index.md", "# Index\n\nSee [[Plan]] and [[Ideas]]. #home")
    write(a / "projects/plan.md", "# Plan\n\nThe okapi launch. Back to [[index]].")
    b.mkdir(parents=True)
    sync = Sync(a, b)
    sync()
    for d, folder in ((one, a), (two, b)):
        d.client.post("/api/v1/knowledge_bases", {"name": "shared", "path": str(folder)})

    def answers(d: Daemon, query: str) -> list[str]:
        reply = d.client.post(d.client.kb("shared", "/search"), {"query": query})
        return sorted(p["relative_path"] for p in reply["passages"])

    for d in (one, two):
        wait_for(lambda d=d: answers(d, "okapi") == ["projects/plan.md"])

    # each machine changes its own files; neither touches a file it did not edit
    plan = one.client.get(one.client.kb("shared", "/documents/projects%2Fplan.md"))
    before_a, before_b = _hashes(a), _hashes(b)
    one.client.request(
        "PUT", one.client.kb("shared", f"/documents/{plan['id']}"),
        {"content": "# Plan\n\nThe okapi launch moves to May. Back to [[index]]."},
    )  # fmt: skip
    write(b / "ideas.md", "# Ideas\n\nAn okapi mascot. #home")
    write(b / "index.md", "# Index\n\nSee [[Plan]], [[Ideas]] and the okapi. #home")
    write(a / "index.md", "# Index\n\nSee [[Plan]] and [[Ideas]], edited on the laptop. #home")
    earlier = (a / "index.md").stat().st_mtime - 60
    os.utime(b / "index.md", (earlier, earlier))  # the desktop's edit was the earlier one
    wait_for(lambda: one.settled("shared") and two.settled("shared"))
    assert {k for k in _hashes(a) if _hashes(a)[k] != before_a.get(k)} == {
        "projects/plan.md", "index.md"
    }  # fmt: skip
    assert {k for k in _hashes(b) if _hashes(b)[k] != before_b.get(k)} == {"ideas.md", "index.md"}
    sync()  # index.md changed on both: the newer wins, the other becomes a conflict copy

    def state(d: Daemon) -> tuple[object, ...]:
        dump = d.dump("shared")
        documents = sorted((row[1], row[4]) for row in dump["documents"])  # path, content hash
        links = d.client.get(d.client.kb("shared", "/documents/index.md/links"))
        conflicts = d.client.get(d.client.kb("shared", "/conflicts"))["conflicts"]
        return (
            documents,
            dump["links"] and sorted((link[1], link[3]) for link in dump["links"]),
            [(o["target"], o["relative_path"]) for o in links["outgoing"]],
            [(c["relative_path"], c["conflicts_with"]) for c in conflicts],
            answers(d, "okapi"),
            d.client.get(d.client.kb("shared", "/tags"))["tags"],
        )

    wait_for(lambda: state(one) == state(two) and len(state(one)[3]) == 1, timeout=30)
    documents, _, outgoing, conflicts, okapi, tags = state(one)
    assert [path for path, _ in documents] == ["ideas.md", "index.md", "projects/plan.md"]
    assert outgoing == [("Plan", "projects/plan.md"), ("Ideas", "ideas.md")]
    assert conflicts == [("index.sync-conflict-20261202-120000-SYNCTST.md", "index.md")]
    assert okapi == ["ideas.md", "projects/plan.md"]  # the desktop's index.md is the copy
    assert tags == [{"tag": "home", "count": 2}]
    synced_a, synced_b = _hashes(a), _hashes(b)
    for d in (one, two):
        d.client.post(d.client.kb("shared", "/reindex"))
    assert (_hashes(a), _hashes(b)) == (synced_a, synced_b)  # indexing wrote nothing
    out = io.StringIO()
    assert cli.main(["--socket", str(two.socket), "conflicts", "shared"], stdout=out) == 0
    assert "syncthing copy of index.md" in out.getvalue()
    status = {k["name"]: k for k in two.client.get("/api/v1/status")["knowledge_bases"]}
    assert status["shared"]["conflicts"] == 1
    async with McpClient(mcp_params(one.socket)) as agent:
        listed = await mcp_call(agent, "list_conflicts", kb="shared")
    assert [c["conflicts_with"] for c in listed["conflicts"]] == ["index.md"]


async def test_thousands_of_conflict_copies_are_listed_a_page_at_a_time(
    shared_daemon: Daemon, tmp_path: Path
) -> None:
    """A vault synced badly: 1,500 conflict copies. The list pages as the documents do
    (limit, offset; total), through the API, the CLI and MCP."""
    d = shared_daemon
    vault = tmp_path / "synced"
    write(vault / "plan.md", "# Plan\n\nthe plan\n")
    for n in range(1500):
        write(vault / f"plan.sync-conflict-20261130-{n:06d}-ABCDEFG.md", "# Plan\n\ncopy\n")
    kb = "synced-" + tmp_path.name[-6:].lower().replace("_", "-")
    d.client.post("/api/v1/knowledge_bases", {"name": kb, "path": str(vault)})
    wait_for(lambda: d.client.get(d.client.kb(kb, "/conflicts"))["total"] == 1500, 60)
    first = d.client.get(d.client.kb(kb, "/conflicts"))
    assert (len(first["conflicts"]), first["limit"], first["offset"]) == (50, 50, 0)
    seen = []
    for offset in range(0, 1500, 500):
        page = d.client.get(d.client.kb(kb, f"/conflicts?limit=500&offset={offset}"))
        seen += [c["relative_path"] for c in page["conflicts"]]
    assert len(seen) == len(set(seen)) == 1500 and seen == sorted(seen)
    out = io.StringIO()
    argv = ["--socket", str(d.socket), "conflicts", kb, "--limit", "2", "--offset", "1498"]
    assert cli.main(argv, stdout=out) == 0
    assert out.getvalue().count("syncthing copy of plan.md") == 2
    assert "1499-1500 of 1500 conflicts" in out.getvalue()
    async with McpClient(mcp_params(d.socket)) as agent:
        listed = await mcp_call(agent, "list_conflicts", kb=kb, limit=3, offset=10)
    assert (listed["total"], len(listed["conflicts"])) == (1500, 3)
    assert [c["relative_path"] for c in listed["conflicts"]] == seen[10:13]
