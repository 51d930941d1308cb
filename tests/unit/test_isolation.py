"""A document the index cannot store is skipped with its reason; the rest of its batch, and
every later reconcile, still commit."""

from __future__ import annotations

from pathlib import Path

from cofferd.domain.models import KnowledgeBase
from cofferd.surfaces.core import Coffer
from tests.support.helpers import bump_mtime, index_dump, skipped_in, write

# refused by the database itself (a constraint, installed below)
POISON = {
    "refused.md": "# POISON-BY-TRIGGER\n\nbody five",
    "refused-frontmatter.md": "---\ntitle: POISON-BY-TRIGGER too\n---\nbody six",
    "sub/refused.md": "# POISON-BY-TRIGGER in a folder\n\nbody seven",
    "refused-late.md": "intro\n\n# POISON-BY-TRIGGER at last\n\nbody eight",
}
# frontmatter escapes that would decode to lone surrogates, which SQLite cannot encode: the
# YAML reader refuses them (the frontmatter is malformed, the note indexed without it), or,
# where a YAML reader takes them, the index refuses the note; never its batch
SURROGATES = {
    "surrogate-title.md": '---\ntitle: "bad \\ud800 title"\n---\nbody one',
    "surrogate-description.md": '---\ndescription: "\\udfff"\n---\n# Fine title\n\nbody two',
    "surrogate-metadata.md": '---\nsource_filename: "x\\ud83d.pdf"\n---\n# Three\n\nbody three',
    "surrogate-heading.md": '---\ntags: [a]\ntitle: "\\udc80"\n---\n## Section\n\nbody four',
}


async def install_refusal(coffer: Coffer) -> None:
    await coffer.stores.db.write(
        lambda conn: conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON documents"
            " WHEN NEW.title LIKE 'POISON-BY-TRIGGER%'"
            " BEGIN SELECT RAISE(ABORT, 'refused by a constraint'); END"
        )
    )


async def test_poison_documents_do_not_stop_their_batch(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    await install_refusal(coffer)
    for i in range(20):
        write(docs / f"good{i:02d}.md", f"# Good {i}\n\nwholesome text number{i}")
    for name, text in {**POISON, **SURROGATES}.items():
        write(docs / name, text)

    r = await coffer.reindexer.reconcile(kb)
    surrogates_stored = len(SURROGATES) - (r.documents_skipped - len(POISON))
    assert r.documents_added == 20 + surrogates_stored
    skipped = [s["relative_path"] for s in r.skipped]
    assert set(POISON) <= set(skipped) <= set(POISON) | set(SURROGATES)
    assert all("cannot be stored" in s["reason"] for s in r.skipped)
    assert (await coffer.stores.index.metrics(kb.name))["documents"] == 20 + surrogates_stored
    assert (await coffer.retrieval.search(kb.name, "number7")).passages
    found = {p.path for p in (await coffer.retrieval.search(kb.name, "body")).passages}
    assert not found & set(POISON)  # nothing half-written
    assert sorted(s["relative_path"] for s in await skipped_in(coffer, kb.name)) == sorted(skipped)

    # a later reconcile is not blocked, and does not read the poison again until it changes
    write(docs / "later.md", "# Later\n\narrives afterwards")
    r = await coffer.reindexer.reconcile(kb)
    assert (r.documents_added, r.documents_skipped) == (1, len(skipped))
    # fixed by its author, a skipped file is indexed
    write(docs / "refused.md", "---\ntitle: good title\n---\nbody one fixed")
    bump_mtime(docs / "refused.md")
    r = await coffer.reindexer.reconcile(kb)
    assert r.documents_added == 1
    assert (await coffer.retrieval.search(kb.name, "fixed")).passages


async def test_the_watcher_path_isolates_too(coffer: Coffer, kb: KnowledgeBase, docs: Path) -> None:
    await install_refusal(coffer)
    write(docs / "ok.md", "# Ok\n\nfine words")
    write(docs / "refused.md", POISON["refused.md"])
    r = await coffer.reindexer.sync_paths(kb, ["ok.md", "refused.md"])
    assert (r.documents_added, r.documents_skipped) == (1, 1)
    dump = await index_dump(coffer, kb.name)
    assert dump["orphan_fts_rows"] == 0 and len(dump["documents"]) == 1
