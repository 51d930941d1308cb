"""Frontmatter in search (title, tags, aliases) and search filters, keyword and vector."""

from __future__ import annotations

import io
import json
import os
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from mcp import Client as McpClient

from cofferctl import cli
from cofferctl.client import ApiError
from cofferd.domain.filters import SearchFilters, parse_filters
from cofferd.domain.models import KnowledgeBase
from cofferd.surfaces.core import Coffer
from tests.support.daemon import Daemon, wait_for
from tests.support.fake_embeddings import FakeEmbeddings
from tests.support.helpers import index_dump, write
from tests.support.mcp_client import call as mcp_call
from tests.support.mcp_client import params as mcp_params

NOTES = {
    "projects/coffer/plan.md": (
        "---\ntitle: Launch plan\ntags: [project/coffer, Urgent]\naliases: [Roadmap]\n---\n"
        "We ship the daemon first. The release date moves."
    ),
    "projects/coffer/log.md": "# Log\n\nDaemon crashed twice; #bug #project/coffer",
    "projects/other/plan.md": (
        "---\ntags: project/other\n---\n# Other\n\nThe daemon of another project."
    ),
    "journal/2020.md": "# Old entry\n\nA daemon story from long ago. #journal",
    "converted.md": ("---\nsource_mode: converted\ntitle: Imported\n---\nDaemon notes from a PDF."),
}
OLD = datetime(2020, 6, 1, tzinfo=UTC).timestamp()


@pytest.fixture
async def notes(coffer: Coffer, kb: KnowledgeBase, docs: Path) -> KnowledgeBase:
    for name, text in NOTES.items():
        write(docs / name, text)
    os.utime(docs / "journal/2020.md", (OLD, OLD))
    await coffer.reindexer.reconcile(kb)
    return kb


async def paths(coffer: Coffer, query: str, **filters: object) -> list[str]:
    result = await coffer.retrieval.search("notes", query, 10, parse_filters(filters))
    return [p.path for p in result.passages]


async def test_tags_aliases_and_titles_are_searchable(coffer: Coffer, notes: KnowledgeBase) -> None:
    assert await paths(coffer, "urgent") == ["projects/coffer/plan.md"]
    assert await paths(coffer, "roadmap") == ["projects/coffer/plan.md"]
    assert await paths(coffer, "launch") == ["projects/coffer/plan.md"]  # frontmatter title
    assert await paths(coffer, "bug") == ["projects/coffer/log.md"]  # inline tag


async def test_documents_carry_their_tags(coffer: Coffer, notes: KnowledgeBase) -> None:
    docs, _ = await coffer.stores.catalog.list_documents("notes", q=None, limit=10, offset=0)
    by_path = {d.path: d for d in docs}
    plan = by_path["projects/coffer/plan.md"]
    assert plan.tags == ("project/coffer", "Urgent") and plan.aliases == ("Roadmap",)
    assert by_path["projects/coffer/log.md"].tags == ("bug", "project/coffer")


async def test_a_title_match_ranks_first(coffer: Coffer, kb: KnowledgeBase, docs: Path) -> None:
    write(docs / "mention.md", "# Notes\n\nWe talked about kubernetes today, among much else.")
    write(docs / "titled.md", "---\ntitle: Kubernetes\n---\nHow our cluster is set up.")
    await coffer.reindexer.reconcile(kb)
    assert (await paths(coffer, "kubernetes"))[0] == "titled.md"


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"folder": "projects/coffer"}, {"projects/coffer/plan.md", "projects/coffer/log.md"}),
        ({"folder": "projects"}, {"projects/coffer/plan.md", "projects/coffer/log.md",
                                  "projects/other/plan.md"}),
        ({"folder": "proj"}, set()),  # a folder, not a string prefix
        ({"tags": ["project"]}, {"projects/coffer/plan.md", "projects/coffer/log.md",
                                 "projects/other/plan.md"}),  # nested tags
        ({"tags": ["PROJECT/coffer", "bug"]}, {"projects/coffer/log.md"}),  # all of them
        ({"tags": ["journal"]}, {"journal/2020.md"}),
        ({"updated_before": "2021-01-01"}, {"journal/2020.md"}),
        ({"updated_after": "2021-01-01", "folder": "journal"}, set()),
        ({"source_mode": "converted"}, {"converted.md"}),
    ],
)  # fmt: skip
async def test_keyword_filters(
    coffer: Coffer, notes: KnowledgeBase, filters: dict[str, object], expected: set[str]
) -> None:
    assert set(await paths(coffer, "daemon", **filters)) == expected


async def test_a_narrow_filter_still_gets_its_best_hits(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    for i in range(60):
        write(docs / f"bulk/{i}.md", f"# Bulk {i}\n\nalpha alpha alpha beta {i}")
    write(docs / "rare/one.md", "# One\n\nalpha, once, among many other words here")
    await coffer.reindexer.reconcile(kb)
    assert "rare/one.md" not in await paths(coffer, "alpha")
    assert await paths(coffer, "alpha", folder="rare") == ["rare/one.md"]


async def test_filters_apply_across_knowledge_bases(coffer: Coffer, notes: KnowledgeBase) -> None:
    other = await coffer.kbs.create("other")
    write(coffer.locations.docs_dir("other") / "x.md", "---\ntags: [bug]\n---\ndaemon elsewhere")
    await coffer.reindexer.reconcile(other)
    merged, _ = await coffer.retrieval.search_all(
        "daemon", 10, None, parse_filters({"tags": ["bug"]})
    )
    assert {(p.knowledge_base, p.path) for p in merged} == {
        ("notes", "projects/coffer/log.md"),
        ("other", "x.md"),
    }


async def test_tags_follow_edits_and_deletes(
    coffer: Coffer, notes: KnowledgeBase, docs: Path
) -> None:
    write(docs / "projects/coffer/log.md", "# Log\n\nDaemon fixed. #done")
    (docs / "projects/other/plan.md").unlink()
    await coffer.reindexer.reconcile(notes)
    assert await paths(coffer, "daemon", tags=["bug"]) == []
    assert await paths(coffer, "daemon", tags=["done"]) == ["projects/coffer/log.md"]
    assert await paths(coffer, "daemon", tags=["project/other"]) == []
    dump = await index_dump(coffer, "notes")
    assert all(doc_id != "" for doc_id, _ in dump["tags"])
    assert len({doc_id for doc_id, _ in dump["tags"]}) == len(
        [d for d in dump["documents"] if d[11] != "[]"]
    )


@pytest.fixture
async def server() -> AsyncIterator[FakeEmbeddings]:
    s = await FakeEmbeddings().start()
    yield s
    await s.stop()


async def test_vector_search_filters_inside_the_nearest_neighbours(
    coffer: Coffer, server: FakeEmbeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COFFER_TEST_EMBED_KEY", "sk-test")
    config = server.config()
    config["default_mode"] = "vector"
    kb = await coffer.kbs.create("vec", config)
    docs = coffer.locations.docs_dir("vec")
    for i in range(40):
        write(docs / f"near/{i}.md", f"cats purr and sleep all day {i}")
    write(docs / "far/dog.md", "dogs bark at the mail carrier")
    await coffer.reindexer.reconcile(kb)
    await coffer.embeddings.drain("vec")
    near = await coffer.retrieval.search("vec", "cats purr sleep", 5)
    assert all(p.path.startswith("near/") for p in near.passages)
    far = await coffer.retrieval.search("vec", "cats purr sleep", 5, SearchFilters(folder="far"))
    assert [p.path for p in far.passages] == ["far/dog.md"]


async def test_vector_hits_need_the_minimum_similarity(
    coffer: Coffer, server: FakeEmbeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COFFER_TEST_EMBED_KEY", "sk-test")
    config = server.config()
    config["embedding"]["min_similarity"] = 0.5
    kb = await coffer.kbs.create("vec", config)
    write(coffer.locations.docs_dir("vec") / "cats.md", "cats purr and sleep all day")
    await coffer.reindexer.reconcile(kb)
    await coffer.embeddings.drain("vec")
    for mode in ("hybrid", "vector"):
        await coffer.kbs.update_config("vec", {"default_mode": mode})
        on_topic = await coffer.retrieval.search("vec", "cats purr sleep")
        assert on_topic.mode == mode and [p.path for p in on_topic.passages] == ["cats.md"]
        off_topic = await coffer.retrieval.search("vec", "quarterly tax filing deadline")
        assert (off_topic.mode, off_topic.passages) == (mode, [])


async def test_filters_through_the_api_cofferctl_and_mcp(
    shared_daemon: Daemon, capsys: pytest.CaptureFixture[str]
) -> None:
    d = shared_daemon
    kb = f"filters-{uuid.uuid4().hex[:6]}"
    d.client.post("/api/v1/knowledge_bases", {"name": kb})
    for name, text in NOTES.items():
        write(d.docs(kb) / name, text)
    os.utime(d.docs(kb) / "journal/2020.md", (OLD, OLD))
    search = d.client.kb(kb, "/search")
    wait_for(lambda: len(d.client.post(search, {"query": "daemon"})["passages"]) == len(NOTES))

    def found(filters: dict[str, Any]) -> set[str]:
        body = {"query": "daemon", "filters": filters}
        return {p["relative_path"] for p in d.client.post(search, body)["passages"]}

    assert found({"folder": "projects/coffer", "tags": ["bug"]}) == {"projects/coffer/log.md"}
    assert found({"updated_before": "2021-01-01"}) == {"journal/2020.md"}
    # times an offset carries beyond year 1 or 9999 in UTC: before or after every note
    far = {
        "updated_after": "0001-01-01T00:00:00+01:00",
        "updated_before": "9999-12-31T23:59:59-01:00",
    }
    assert found(far) == set(NOTES)
    assert found({"updated_before": "0001-01-01T00:59:00+01:00"}) == set()
    assert found({"updated_after": "9999-12-31T23:00:00-01:00"}) == set()
    everything = d.client.post("/api/v1/search", {"query": "daemon", "filters": far})
    assert {p["relative_path"] for p in everything["passages"] if p["knowledge_base"] == kb} == set(
        NOTES
    )
    every = d.client.post("/api/v1/search", {"query": "daemon", "filters": {"tags": ["journal"]}})
    assert [(p["knowledge_base"], p["relative_path"]) for p in every["passages"]] == [
        (kb, "journal/2020.md")
    ]
    doc = d.client.get(d.client.kb(kb, "/documents"), q="Launch")["documents"][0]
    assert doc["tags"] == ["project/coffer", "Urgent"] and doc["aliases"] == ["Roadmap"]
    for bad, field in [({"folder": "/etc"}, "filters.folder"), ({"when": 1}, "filters.when")]:
        with pytest.raises(ApiError) as err:
            d.client.post(search, {"query": "daemon", "filters": bad})
        assert err.value.code == "VALIDATION_ERROR" and field in json.dumps(err.value.details)

    def cli_paths(*options: str) -> list[str]:
        out = io.StringIO()
        args = ["--socket", str(d.socket), "search", kb, "daemon", "--json", *options]
        assert cli.main(args, stdout=out) == 0
        return sorted(p["relative_path"] for p in json.loads(out.getvalue())["passages"])

    assert cli_paths("--tag", "project", "--folder", "projects/other") == ["projects/other/plan.md"]
    assert cli_paths("--until", "2020-06-01") == ["journal/2020.md"]  # the whole day
    assert "journal/2020.md" not in cli_paths("--since", "30d")
    assert cli_paths("--source-mode", "converted") == ["converted.md"]
    assert cli_paths("--since", "99999999999d", "--until", "9999-12-31") == sorted(NOTES)
    assert cli_paths("--until", "0001-01-01T00:30+01:00") == []
    args = ["--socket", str(d.socket), "search", kb, "daemon", "--since", "last tuesday"]
    assert cli.main(args, stdout=io.StringIO()) == cli.EXIT_USAGE
    assert "--since takes a date" in capsys.readouterr().err

    async with McpClient(mcp_params(d.socket)) as client:
        scoped = await mcp_call(client, "search", kb=kb, query="daemon", tags=["bug"])
        assert [p["relative_path"] for p in scoped["passages"]] == ["projects/coffer/log.md"]
        everywhere = await mcp_call(client, "search_all", query="daemon", folder="journal")
        assert {p["knowledge_base"] for p in everywhere["passages"]} == {kb}
