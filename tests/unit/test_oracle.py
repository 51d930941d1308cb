"""The oracle: after any file changes and a reconcile, the index equals a fresh rebuild,
and reconciling again changes nothing."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coffer_kernel.locations import Locations
from cofferd.surfaces.core import Coffer
from tests.support.helpers import bump_mtime, index_dump, rebuild_dump, total_changes, write

NAMES = ["a.md", "b.md", "notes/c.md", "notes/deep/d.md", "e f.md", "东京.md", "x/y.md"]
BODIES = [
    "# One\n\nalpha beta",
    "---\ntitle: Two\n---\ngamma 東京都",
    "plain text without heading",
    "# Big\n\n" + "\n\n".join("para " + "w " * 50 for _ in range(15)),
    "",
    "---\nbroken: [\n---\nkeep me",
    "---\ntags: [t1, area/t2]\naliases: [Other]\n---\nsee [[a]], [[notes/c|c]], [[gone]] #t3",
    "# Links\n\n[up](../a.md) [here](deep/d.md) [[東京]] `[[not a link]]` #t1",
]

op = st.one_of(
    st.tuples(st.just("write"), st.sampled_from(NAMES), st.sampled_from(BODIES)),
    st.tuples(st.just("delete"), st.sampled_from(NAMES), st.none()),
    st.tuples(st.just("rename"), st.sampled_from(NAMES), st.sampled_from(NAMES)),
    st.tuples(st.just("touch"), st.sampled_from(NAMES), st.none()),
    st.tuples(st.just("rmdir"), st.sampled_from(["notes", "x"]), st.none()),
    st.tuples(st.just("reconcile"), st.none(), st.none()),
)


def apply(docs: Path, action: str, a: str | None, b: str | None) -> None:
    if action == "write":
        assert a is not None and b is not None
        write(docs / a, b)
    elif action == "delete" and a and (docs / a).exists():
        (docs / a).unlink()
    elif action == "rename" and a and b and (docs / a).exists() and a != b:
        (docs / b).parent.mkdir(parents=True, exist_ok=True)
        (docs / a).rename(docs / b)
    elif action == "touch" and a and (docs / a).exists():
        bump_mtime(docs / a)
    elif action == "rmdir" and a:
        shutil.rmtree(docs / a, ignore_errors=True)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=st.lists(op, min_size=1, max_size=15))
async def test_index_equals_rebuild_after_any_edits(tmp_path: Path, ops: list[tuple]) -> None:
    home = tmp_path / uuid.uuid4().hex
    coffer = await Coffer.open(Locations(home=home, socket=home / "s.sock"))
    try:
        kb = await coffer.kbs.create("kb")
        docs = coffer.locations.docs_dir("kb")
        for action, a, b in ops:
            if action == "reconcile":
                await coffer.reindexer.reconcile(kb)
            else:
                apply(docs, action, a, b)
        await coffer.reindexer.reconcile(kb)
        dump = await index_dump(coffer, "kb")
        assert dump == await rebuild_dump(coffer, kb)
        assert dump["orphan_fts_rows"] == 0
        before = await total_changes(coffer)
        again = await coffer.reindexer.reconcile(kb)
        assert not again.changed
        assert await total_changes(coffer) == before
    finally:
        await coffer.close()


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=st.lists(op, min_size=1, max_size=12))
async def test_sync_paths_of_touched_paths_equals_rebuild(tmp_path: Path, ops: list[tuple]) -> None:
    """What the watcher will do: reconcile only the paths that events named."""
    home = tmp_path / uuid.uuid4().hex
    coffer = await Coffer.open(Locations(home=home, socket=home / "s.sock"))
    try:
        kb = await coffer.kbs.create("kb")
        docs = coffer.locations.docs_dir("kb")
        touched: set[str] = set()
        for action, a, b in ops:
            if action == "reconcile":
                await coffer.reindexer.sync_paths(kb, touched - {""})
                touched.clear()
                continue
            apply(docs, action, a, b)
            touched.add(a or "")
            if action == "rename" and b:
                touched.add(b)
        await coffer.reindexer.sync_paths(kb, touched - {""})
        assert await index_dump(coffer, "kb") == await rebuild_dump(coffer, kb)
    finally:
        await coffer.close()
