"""Ignore files with git's semantics, applied alike by the index, search, grep and the watcher."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from watchfiles import Change

from cofferd.domain.models import KnowledgeBase
from cofferd.infrastructure.files.document_policy import Kind
from cofferd.infrastructure.files.ignore_rules import IgnoreRules
from cofferd.surfaces.core import Coffer
from cofferd.surfaces.watcher import Watcher
from tests.support.daemon import Daemon, wait_for
from tests.support.file_trees import TREE, make_tree
from tests.support.health_prober import Prober
from tests.support.helpers import write


@pytest.mark.parametrize(("path", "kept"), TREE.items())
def test_git_semantics(tmp_path: Path, path: str, kept: bool) -> None:
    make_tree(tmp_path)
    excluded = IgnoreRules(lambda: tmp_path).excluded(path)
    assert excluded is not kept or path.startswith("node_modules")  # noise, not an ignore file


async def test_index_search_and_grep_follow_the_ignore_files(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    expected = make_tree(docs)
    await coffer.reindexer.reconcile(kb)
    indexed, _ = await coffer.stores.catalog.list_documents(kb.name, q=None, limit=100, offset=0)
    grepped = await coffer.retrieval.grep(kb.name, "platypus", 1000)
    searched = await coffer.retrieval.search(kb.name, "platypus", 100)
    assert sorted(d.path for d in indexed) == expected
    assert sorted({h.path for h in grepped.hits}) == expected
    assert sorted({p.path for p in searched.passages}) == expected

    # a path the watcher names is judged by the same rules
    write(docs / "build/new.md", "platypus again")
    write(docs / "sub/deeper/wanted.md", "platypus wanted")
    await coffer.reindexer.sync_paths(kb, {"build/new.md", "sub/deeper/wanted.md"})
    indexed, _ = await coffer.stores.catalog.list_documents(kb.name, q=None, limit=100, offset=0)
    assert sorted(d.path for d in indexed) == expected


def test_the_watcher_passes_ignore_files_on(coffer: Coffer) -> None:
    for name in (".gitignore", "sub/.ignore", ".cofferignore"):
        assert coffer.policy.classify("notes", name, is_dir=None) is Kind.IGNORE_FILE, name
    assert coffer.policy.classify("notes", ".git/.gitignore") is Kind.OTHER
    assert not coffer.policy.is_document("notes", ".gitignore")
    docs = coffer.locations.docs_dir("notes")
    watcher = Watcher(coffer.policy, coffer.indexing)
    _, whole, paths = watcher._sort(
        {(Change.modified, str(docs / "sub" / ".ignore"))}, {"notes": docs}
    )
    assert whole == {"notes"} and not paths


def test_changing_an_ignore_file_takes_effect_without_a_restart(daemon: Daemon) -> None:
    d = daemon
    docs = d.docs("notes")
    write(docs / "keep.md", "# Keep\n\nwombat kept")
    write(docs / "scratch/a.md", "# A\n\nwombat scratch")

    def found() -> list[str]:
        reply = d.client.post(d.client.kb("notes", "/search"), {"query": "wombat"})
        return sorted(p["relative_path"] for p in reply["passages"])

    wait_for(lambda: found() == ["keep.md", "scratch/a.md"])
    write(docs / ".cofferignore", "scratch/\n")
    wait_for(lambda: found() == ["keep.md"])
    hits = d.client.post(d.client.kb("notes", "/grep"), {"pattern": "wombat"})["hits"]
    assert [h["relative_path"] for h in hits] == ["keep.md"]
    (docs / ".cofferignore").unlink()
    wait_for(lambda: found() == ["keep.md", "scratch/a.md"])


def test_lines_git_matches_nothing_with_leave_the_others_in_force() -> None:
    """A bracket no regular expression takes, a lone backslash or `!`: each such line is
    left out (git matches nothing with it), never the whole ignore file, never an error."""
    from cofferd.infrastructure.files.ignore_patterns import linear_spec

    spec = linear_spec(["a[?-.]b", "\\", "!", "*.tmp", "!keep.tmp"])
    assert spec.include("x.tmp") is True and spec.include("keep.tmp") is False
    assert spec.include("a?b") is None


def test_many_ignore_patterns_apply_at_once_while_the_daemon_answers(daemon: Daemon) -> None:
    """Folders each with an ignore file of 20,000 wildcard patterns (310 KB, of which the
    first 10,000 rules apply) are compiled in a fraction of a second each, without holding
    the daemon up, and apply: an ignored note leaves search, a taken-back one stays; changed,
    they apply again."""
    d = daemon
    docs = d.docs("notes")
    folders = [f"f{n}" for n in range(6)]
    for folder in folders:
        for name in ("plain.md", "secret.md", "secret-kept.md"):
            write(docs / folder / name, f"# {name}\n\nwombat in {folder}/{name}\n")

    def found() -> set[str]:
        reply = d.client.post(d.client.kb("notes", "/search"), {"query": "wombat", "top_k": 50})
        return {p["relative_path"] for p in reply["passages"]}

    everything = {
        f"{f}/{name}" for f in folders for name in ("plain.md", "secret.md", "secret-kept.md")
    }
    wait_for(lambda: found() == everything, timeout=60)
    swaps = (("secret.md", "secret-kept.md"), ("secret-kept.md", "secret.md"))
    texts = {  # made before the prober starts: building them would hold its thread up
        (taken, folder): f"secret*.md\n!{kept}\n"
        + "".join(f"*{folder}{n:x}{taken}*.tmp{n % 7}\n" for n in range(20_000))
        for taken, kept in swaps
        for folder in folders
    }
    with Prober(d.socket) as prober:
        for taken, _ in swaps:
            started = time.monotonic()
            for folder in folders:
                write(docs / folder / ".gitignore", texts[taken, folder])
            expected = everything - {f"{f}/{taken}" for f in folders}
            wait_for(lambda: found() == expected, timeout=120)  # noqa: B023
            applied = time.monotonic() - started
            assert applied < 10, f"{applied:.1f} s"  # 17 s before, compiling each with Python's re
    assert len(prober.latencies) > 10
    assert max(prober.latencies) < 0.25, sorted(prober.latencies)[-5:]


def test_an_unchanged_ignore_file_is_compiled_once(tmp_path: Path) -> None:
    """Compiled rules are kept by their text's digest: the next full scan, or another folder
    with the same file, takes them as they are; a changed file is compiled afresh."""
    write(tmp_path / ".gitignore", "*.log.md\n")
    write(tmp_path / "sub" / ".gitignore", "*.log.md\n")
    first = IgnoreRules(lambda: tmp_path)
    again = IgnoreRules(lambda: tmp_path)  # as the next full scan reads them
    assert again.spec("") is first.spec("") is first.spec("sub") is not None
    write(tmp_path / ".gitignore", "*.tmp.md\n")
    changed = IgnoreRules(lambda: tmp_path)
    assert changed.spec("") is not first.spec("")
    assert changed.excluded("a.tmp.md") and not changed.excluded("a.log.md")
    assert changed.excluded("sub/a.log.md")
