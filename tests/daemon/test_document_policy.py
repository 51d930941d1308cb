"""One document policy: the index, grep, the watcher and cofferctl agree on what a document is."""

from __future__ import annotations

import io
from pathlib import Path

from watchfiles import Change

from cofferctl import cli
from cofferd.domain.models import KnowledgeBase
from cofferd.infrastructure.files.document_policy import Kind
from cofferd.surfaces.core import Coffer
from cofferd.surfaces.watcher import Watcher
from tests.support.daemon import Daemon, wait_for
from tests.support.helpers import write

TREE = {
    "plain.md": True,
    "UPPER.MD": True,
    "Mixed.Markdown": True,
    "deep/er/note.md": True,
    "~$lock.md": False,  # Office owner file
    ".hidden.md": False,
    ".obsidian/config.md": False,
    "note.md.swp": False,
    "note.md~": False,
    "#note.md#": False,
    "4913": False,
    "draft.tmp": False,
    "backup.bak/inside.md": False,
    "notes.txt": True,  # plain text is read where it lies (the default `index_formats`)
    "notes.rtf": False,  # a format no KB indexes
    ".hidden/notes.txt": False,
}


async def test_search_and_grep_see_the_same_files(
    coffer: Coffer, kb: KnowledgeBase, docs: Path, tmp_path: Path
) -> None:
    for path in TREE:
        write(docs / path, f"# {path}\n\nzebracorn in {path}\n")
    (docs / "link.md").symlink_to(docs / "plain.md")  # a second path to an indexed file
    write(tmp_path / "outside.md", "zebracorn outside")
    (docs / "outside-link.md").symlink_to(tmp_path / "outside.md")
    (docs / "linked-folder").symlink_to(docs / "deep", target_is_directory=True)
    expected = sorted(p for p, is_doc in TREE.items() if is_doc)

    await coffer.reindexer.reconcile(kb)
    indexed, _ = await coffer.stores.catalog.list_documents(kb.name, q=None, limit=100, offset=0)
    grepped = await coffer.retrieval.grep(kb.name, "zebracorn", 1000)
    searched = await coffer.retrieval.search(kb.name, "zebracorn", 100)

    assert sorted(d.path for d in indexed) == expected
    assert sorted({h.path for h in grepped.hits}) == expected
    assert sorted({p.path for p in searched.passages}) == expected
    assert all(h.document_id for h in grepped.hits)  # every grep hit is an indexed document


def test_the_watcher_sorts_events_by_the_same_rules(coffer: Coffer) -> None:
    policy = coffer.policy
    docs = coffer.locations.docs_dir("notes")
    watcher = Watcher(policy, coffer.indexing)
    noise = ["~$lock.md", ".hidden.md", "note.md.swp", "note.md~", "#note.md#", "4913", "a.tmp"]
    for name in noise:
        assert policy.classify("notes", name) is Kind.OTHER, name
    documents = ["plain.md", "UPPER.MD", "Mixed.Markdown", "deep/er/note.md"]
    for name in documents:
        assert policy.is_document("notes", name), name
    in_tree = {
        *((Change.added, str(docs / name)) for name in [*noise, *documents]),
        (Change.added, str(docs / ".obsidian" / "config.md")),
        (Change.added, str(docs / "deep" / "folder")),
    }
    count, whole, paths = watcher._sort(in_tree, {"notes": docs})
    assert count == len(in_tree) and whole == set()
    assert paths == {"notes": {*documents, "deep/folder"}}
    in_folders = {  # the knowledge root and each KB's folder, watched alone
        (Change.modified, str(coffer.locations.kb_config_path("notes"))),
        (Change.added, str(coffer.locations.raw_dir("notes") / "x.pdf")),
        (Change.added, str(coffer.locations.kb_config_path(".trash"))),
    }
    count, whole, paths = watcher._sort(in_folders, None)
    assert count == len(in_folders) and whole == {"notes"} and paths == {}


def test_cofferctl_takes_its_formats_from_the_daemon(shared_daemon: Daemon, tmp_path: Path) -> None:
    status = shared_daemon.client.get("/api/v1/status")
    assert {"md", "txt", "pdf", "docx"} <= set(status["formats"])
    assert {"markdown", "text", "htm"} <= set(status["extensions"])
    folder = tmp_path / "inbox"
    write(folder / "a.text", "plain words in a .text file")
    write(folder / "b.markdown", "# B\n\nmarkdown alias")
    write(folder / "c.png", "not a document")
    out = io.StringIO()
    code = cli.main(
        ["--socket", str(shared_daemon.socket), "add", "notes", str(folder), "--json"],
        stdout=out,
    )
    assert code == 0, out.getvalue()
    assert '"added": 2' in out.getvalue() and '"ignored": 1' in out.getvalue()
    wait_for(lambda: shared_daemon.client.get(shared_daemon.client.kb("notes", "/documents")))
