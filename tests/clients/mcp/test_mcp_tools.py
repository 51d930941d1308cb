"""The rest of Coffer through MCP, each tool by the real `mcp` client against the real
daemon: filters, cross-KB search, links, tags, conflicts, status, metrics, reindex, the
tools that reconvert originals, resources and prompts."""

from __future__ import annotations

from pathlib import Path

from mcp import Client

from tests.support.daemon import Daemon, wait_for
from tests.support.mcp_client import AGENT, call, error_of, new_kb, params


def add(d: Daemon, kb: str, content: str, **extra: object) -> dict[str, object]:
    body = {"content": content, **extra}
    return dict(d.client.post(d.client.kb(kb, "/documents"), body)["document"])


async def test_search_filters_and_every_knowledge_base(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb, other = new_kb(d), new_kb(d)
    d.docs(kb).joinpath("projects").mkdir(parents=True, exist_ok=True)
    d.docs(kb).joinpath("projects", "roof.md").write_text(
        "---\ntags: [house]\n---\n# Roof\n\nThe roof needs new tiles.\n"
    )
    add(d, kb, "# Tiles elsewhere\n\nKitchen tiles are blue.\n")
    add(d, other, "# Garden tiles\n\nTiles for the garden path.\n")
    wait_for(lambda: d.client.get(d.client.kb(kb, "/metrics"))["documents"] == 2)
    async with Client(params(d.socket), client_info=AGENT) as client:
        every = await call(client, "search", kb=kb, query="tiles")
        assert len(every["passages"]) == 2
        in_folder = await call(client, "search", kb=kb, query="tiles", folder="projects")
        assert [p["relative_path"] for p in in_folder["passages"]] == ["projects/roof.md"]
        tagged = await call(client, "search", kb=kb, query="tiles", tags=["house"])
        assert [p["title"] for p in tagged["passages"]] == ["Roof"]
        assert not (await call(client, "search", kb=kb, query="tiles",
                               updated_before="2000-01-01"))["passages"]  # fmt: skip
        assert not (await call(client, "search", kb=kb, query="tiles",
                               source_mode="converted"))["passages"]  # fmt: skip
        both = await call(client, "search_all", query="tiles", knowledge_bases=[kb, other])
        assert set(both["knowledge_bases"]) == {kb, other}
        assert {p["knowledge_base"] for p in both["passages"]} == {kb, other}
        unfiltered = await call(client, "search_all", query="garden path")
        assert other in unfiltered["knowledge_bases"]  # every enabled one, said so
        assert "source_mode" in await error_of(
            client, "search", kb=kb, query="tiles", source_mode="typed"
        )


async def test_links_tags_and_conflicts(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)
    docs = d.docs(kb)
    docs.mkdir(parents=True, exist_ok=True)
    (docs / "plan.md").write_text("# Plan\n\nSee [[Budget]]. #project\n")
    (docs / "budget.md").write_text("# Budget\n\nMoney. #project #money\n")
    (docs / "plan.sync-conflict-20261130-101500-ABCDEFG.md").write_text("# Plan\n\nOther.")
    wait_for(lambda: d.client.get(d.client.kb(kb, "/metrics"))["documents"] == 2)
    plan = d.client.get(d.client.kb(kb, "/documents/plan.md"))
    budget = d.client.get(d.client.kb(kb, "/documents/budget.md"))
    async with Client(params(d.socket), client_info=AGENT) as client:
        links = await call(client, "get_links", kb=kb, document_id=str(budget["id"]))
        assert [b["document_id"] for b in links["backlinks"]] == [plan["id"]]
        out = await call(client, "get_links", kb=kb, document_id=str(plan["id"]))
        assert out["outgoing"][0]["document_id"] == budget["id"]
        tags = await call(client, "list_tags", kb=kb)
        assert tags["tags"][0] == {"tag": "project", "count": 2}
        conflicts = await call(client, "list_conflicts", kb=kb)
        assert conflicts["conflicts"][0]["kind"] == "sync_copy"


async def test_status_metrics_and_reindex(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)
    add(d, kb, "# One\n\nFirst.\n")
    async with Client(params(d.socket), client_info=AGENT) as client:
        status = await call(client, "status")
        assert kb in [k["name"] for k in status["knowledge_bases"]]
        metrics = await call(client, "metrics", kb=kb)
        assert metrics["documents"] == 1
        d.docs(kb).joinpath("two.md").write_text("# Two\n\nSecond.\n")
        counts = await call(client, "reindex", kb=kb)
        assert counts["scanned"] == 2
        wait_for(lambda: d.client.get(d.client.kb(kb, "/metrics"))["documents"] == 2)
        assert "KB_NOT_FOUND" in await error_of(client, "metrics", kb="no-such-kb")


async def test_originals_converted_again(shared_daemon: Daemon, tmp_path: Path) -> None:
    d = shared_daemon
    kb = new_kb(d)
    source = tmp_path / "report.html"
    source.write_text("<h1>Report</h1><p>first draft</p>")
    tracked = d.client.post(d.client.kb(kb, "/documents"), {"source_path": str(source)})
    doc_id = tracked["document"]["id"]
    async with Client(params(d.socket), client_info=AGENT) as client:
        again = await call(client, "reconvert_document", kb=kb, document_id=doc_id)
        assert again["document"]["id"] == doc_id and again["document"]["content_sha256"]
        source.write_text("<h1>Report</h1><p>second draft</p>")
        checked = await call(client, "check_sources", kb=kb)
        assert [s["document_id"] for s in checked["changed"]] == [doc_id]
        updated = await call(client, "update_source", kb=kb, document_id=doc_id)
        assert updated["status"] == "updated" and updated["document"]["path"]
        assert "second draft" in Path(updated["document"]["path"]).read_text()
        source.unlink()
        assert "SOURCE_MISSING" in await error_of(
            client, "update_source", kb=kb, document_id=doc_id
        )


async def test_documents_are_resources(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)
    d.docs(kb).joinpath("a folder").mkdir(parents=True, exist_ok=True)
    d.docs(kb).joinpath("a folder", "rye bread.md").write_text("# Rye bread\n\nSour rye.\n")
    wait_for(lambda: d.client.get(d.client.kb(kb, "/metrics"))["documents"] == 1)
    uri = f"coffer://{kb}/a%20folder/rye%20bread.md"
    async with Client(params(d.socket), client_info=AGENT) as client:
        templates = (await client.list_resource_templates()).resource_templates
        assert templates[0].uri_template == "coffer://{kb}/{+path}"
        listed, cursor = [], None
        while True:
            page = await client.list_resources(cursor=cursor)
            listed += [str(r.uri) for r in page.resources]
            if not (cursor := page.next_cursor):
                break
        assert uri in listed
        read = await client.read_resource(uri)
        assert "Sour rye." in read.contents[0].text  # type: ignore[union-attr]
        assert read.contents[0].mime_type == "text/markdown"
        found = await call(client, "search", kb=kb, query="rye")
        assert found["passages"][0]["uri"] == uri


async def test_a_prompt_answers_from_notes_with_citations(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)
    add(d, kb, "# Boiler\n\nThe boiler was serviced in March by Ada.\n", title="Boiler")
    async with Client(params(d.socket), client_info=AGENT) as client:
        prompts = (await client.list_prompts()).prompts
        assert [p.name for p in prompts] == ["answer_from_notes"]
        got = await client.get_prompt("answer_from_notes", {"question": "boiler service",
                                                            "kb": kb})  # fmt: skip
        text = got.messages[0].content.text  # type: ignore[union-attr]
        assert "[1] Boiler (coffer://" in text and "serviced in March" in text
        assert "Cite" in text
        everywhere = await client.get_prompt("answer_from_notes", {"question": "boiler Ada"})
        assert "serviced in March" in everywhere.messages[0].content.text  # type: ignore[union-attr]


async def test_an_agents_note_goes_into_the_folder_it_names(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_kb(d)
    async with Client(params(d.socket), client_info=AGENT) as client:
        note = {"kb": kb, "content": "Two herons by the pond.", "title": "Heron sightings"}
        added = await call(client, "add_document", **note, folder="Inbox/birds")
        assert added["document"]["path"] == str(d.docs(kb) / "Inbox/birds/Heron sightings.md")
        assert "VALIDATION_ERROR" in await error_of(client, "add_document", **note, folder="../x")


async def test_documents_indexed_where_they_lie_through_mcp(shared_daemon: Daemon) -> None:
    """A PDF in the folder: searched with its page, filtered by format, read as a resource
    (its converted text), fetched with `derived`, never edited."""
    from tests.support.samples import make_pdf

    d = shared_daemon
    kb = new_kb(d)  # the default formats hold pdf
    d.docs(kb).joinpath("papers").mkdir(parents=True, exist_ok=True)
    d.docs(kb).joinpath("papers", "study.pdf").write_bytes(make_pdf("zqmcptoken results", 2))
    d.docs(kb).joinpath("note.md").write_text("# Note\n\nzqmcptoken in a note\n")
    wait_for(lambda: d.client.get(d.client.kb(kb, "/metrics"))["documents"] == 2, 60)
    uri = f"coffer://{kb}/papers/study.pdf"
    async with Client(params(d.socket), client_info=AGENT) as client:
        found = await call(client, "search", kb=kb, query="zqmcptoken", format=["pdf"])
        # the text is on both pages, which flow into one passage: its first match's page
        passages = found["passages"]
        assert [(p["page"], p["location"]) for p in passages] == [(1, "page 1")]
        assert {p["uri"] for p in passages} == {uri}
        assert passages[0]["path"] == str(d.docs(kb) / "papers" / "study.pdf")
        read = await client.read_resource(uri)
        assert "zqmcptoken" in read.contents[0].text  # type: ignore[union-attr]
        doc = await call(client, "get_document", kb=kb, document_id="papers/study.pdf")
        assert doc["derived"] is True and "zqmcptoken" in doc["content"]
        refused = await error_of(
            client,
            "edit_document",
            kb=kb,
            document_id="papers/study.pdf",
            content="no",
            expected_sha256=doc["content_sha256"],
        )
        assert "DOCUMENT_READ_ONLY" in refused
    assert d.docs(kb).joinpath("papers", "study.pdf").read_bytes()[:5] == b"%PDF-"


async def test_an_agents_note_says_its_title_as_the_vaults_notes_do(
    shared_daemon: Daemon, tmp_path: Path
) -> None:
    """In a vault whose notes say their titles by `# Heading` (no frontmatter), an agent's
    note is written so too: content that starts with `# Title` as it is, content without
    one under `# Title`; an edit of a note an older Coffer wrote (a frontmatter title over
    the same heading) drops the doubled title. A vault whose notes hold frontmatter titles
    gets one."""
    d = shared_daemon
    plain, fronted = tmp_path / "plain", tmp_path / "fronted"
    for n in range(3):
        (plain / f"note{n}.md").parent.mkdir(parents=True, exist_ok=True)
        (plain / f"note{n}.md").write_text(f"# Note {n}\n\nplain note {n}\n")
        (fronted / f"note{n}.md").parent.mkdir(parents=True, exist_ok=True)
        (fronted / f"note{n}.md").write_text(f"---\ntitle: Note {n}\n---\nfronted note {n}\n")
    (plain / "old.md").write_text("---\ntitle: Old finding\n---\n# Old finding\n\nfirst\n")
    kb, other = f"{new_kb(d)}-plain", f"{new_kb(d)}-fronted"
    d.client.post("/api/v1/knowledge_bases", {"name": kb, "path": str(plain)})
    d.client.post("/api/v1/knowledge_bases", {"name": other, "path": str(fronted)})
    for name, count in ((kb, 4), (other, 3)):
        wait_for(lambda n=name, c=count: d.client.get(d.client.kb(n, "/documents"))["total"] == c)
    async with Client(params(d.socket), client_info=AGENT) as client:
        content = "# Heron sightings\n\nTwo herons by the pond.\n"
        added = await call(client, "add_document", kb=kb, title="Heron sightings", content=content)
        assert Path(added["document"]["path"]).read_text() == content
        added = await call(client, "add_document", kb=kb, title="Egrets", content="Two egrets.\n")
        assert Path(added["document"]["path"]).read_text() == "# Egrets\n\nTwo egrets.\n"
        assert added["document"]["title"] == "Egrets"
        old = await call(client, "get_document", kb=kb, document_id="old.md")
        await call(
            client, "edit_document", kb=kb, document_id="old.md",
            content="# Old finding\n\nsecond\n", expected_sha256=old["content_sha256"],
        )  # fmt: skip
        assert (plain / "old.md").read_text() == "# Old finding\n\nsecond\n"
        added = await call(client, "add_document", kb=other, title="Ibis", content="An ibis.\n")
        assert Path(added["document"]["path"]).read_text() == "---\ntitle: Ibis\n---\nAn ibis.\n"
