"""Links and tags: parsed like Obsidian and Markdown write them, resolved like Obsidian,
kept by the Reindexer like chunks (a rebuild reproduces them), and documents addressed by
path or id prefix wherever an id is taken."""

from __future__ import annotations

import io
import json
import sqlite3
import uuid
from pathlib import Path

import pytest
from mcp import Client as McpClient

from coffer_kernel.link_targets import DocumentIndexOfPaths
from cofferctl import cli
from cofferctl.client import ApiError
from cofferd.domain.links import Link, as_read, links_of
from cofferd.domain.models import KnowledgeBase
from cofferd.surfaces.core import Coffer
from tests.support.daemon import Daemon, cleanup, new_daemon, wait_for
from tests.support.helpers import index_dump, rebuild_dump, write
from tests.support.mcp_client import call as mcp_call
from tests.support.mcp_client import error_of
from tests.support.mcp_client import params as mcp_params


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("see [[Plan]]", [("wiki", "Plan", "plan")]),
        ("[[projects/Plan.md|the plan]]", [("wiki", "projects/Plan.md", "projects/plan")]),
        ("[[Plan#Budget]] and ![[diagram]]", [("wiki", "Plan#Budget", "plan"),
                                               ("wiki", "diagram", "diagram")]),
        ("[[#Local heading]]", []),
        ("[x](other.md) [y](../up.md#h) [z](<with space.md>)",
         [("markdown", "other.md", "notes/other"), ("markdown", "../up.md#h", "up"),
          ("markdown", "with space.md", "notes/with space")]),
        ("[a](%C3%A9t%C3%A9.md) [b](/root.MD)", [("markdown", "%C3%A9t%C3%A9.md", "notes/été"),
                                                 ("markdown", "/root.MD", "root")]),
        ("[w](https://x.org/a.md) [m](mailto:a@b) [d](sub/) [q](?x)", []),
        ("[o](../../out.md)", [("markdown", "../../out.md", "../out")]),  # listed "outside"
        ("[i](pic.png) ![img](p.md) ![[x.png#interface]] [[manual.pdf]]",
         [("wiki", "x.png#interface", "x.png"), ("wiki", "manual.pdf", "manual.pdf"),
          ("markdown", "pic.png", "notes/pic.png"), ("markdown", "p.md", "notes/p")]),
        ("`[[in code]]`\n```\n[[fenced]]\n```\n    [[indented]]", []),
    ],
)  # fmt: skip
def test_links_are_read_as_written(text: str, expected: list[tuple[str, str, str]]) -> None:
    found = links_of(text, "notes/here.md", first_line=3)
    assert [(k.type, k.target, k.key) for k in found] == expected
    assert all(k.line == 3 for k in found)


def test_a_link_knows_where_it_is_in_its_line() -> None:
    line = "`code [[no]]` 見て [[計画#予算|the plan]] and [x](<my plan.md> 't') ![[img]]"
    spans = [line[k.start : k.end] for k in links_of(line, "here.md")]
    assert spans == ["[[計画#予算|the plan]]", "![[img]]", "[x](<my plan.md> 't')"]


def test_resolution_follows_obsidian() -> None:
    index = DocumentIndexOfPaths(
        ["Plan.md", "projects/plan.md", "projects/deep/Notes.md", "archive/2020/notes.md",
         "one/only.markdown"]
    )  # fmt: skip

    def resolve(key: str, type_: str = "wiki") -> tuple[str | None, bool]:
        r = index.resolve(Link(type_, key, key, 1))  # type: ignore[arg-type]
        return r.path, r.ambiguous

    assert resolve("plan") == ("Plan.md", False)  # the whole path matches, any case
    assert resolve("projects/plan") == ("projects/plan.md", False)
    assert resolve("notes") == ("archive/2020/notes.md", True)  # shortest path, flagged
    assert resolve("deep/notes") == ("projects/deep/Notes.md", False)
    assert resolve("only") == ("one/only.markdown", False)
    assert resolve("nowhere") == (None, False)
    assert resolve("./notes", "markdown") == (None, False)  # a Markdown link's path says where
    # ...and one that leads nowhere from its folder is found as Obsidian finds a shortest path
    assert resolve("deep/notes", "markdown") == ("projects/deep/Notes.md", False)


def test_every_file_is_a_target_and_a_markdown_link_falls_back_to_its_name() -> None:
    index = DocumentIndexOfPaths(
        ["Plan.md", "a/pic.png.md"],
        ["Attachments/pic.png", "Attachments/Plan", "b/pic.png", "Boards/x.canvas", "a/pic.png"],
    )

    def resolve(kind: str, written: str, folder: str = "notes") -> tuple[str | None, bool, bool]:
        (link,) = links_of(f"[[{written}]]" if kind == "wiki" else f"![x]({written})",
                           f"{folder}/here.md")  # fmt: skip
        found = index.resolve(link)
        return found.path, found.ambiguous, found.document

    assert resolve("wiki", "PIC.PNG#interface") == ("b/pic.png", True, False)  # the shortest
    assert resolve("wiki", "b/pic.png") == ("b/pic.png", False, False)
    assert resolve("wiki", "x.canvas") == ("Boards/x.canvas", False, False)
    assert resolve("wiki", "x") == (None, False, True)  # a file answers with its extension
    assert resolve("wiki", "plan") == ("Plan.md", False, True)  # a note before a file
    assert resolve("wiki", "a/pic.png") == ("a/pic.png.md", False, True)  # a note first
    assert resolve("markdown", "pic.png") == ("b/pic.png", True, False)
    assert resolve("markdown", "pic.png", "Attachments") == ("Attachments/pic.png", False, False)
    assert resolve("markdown", "../Boards/x.canvas") == ("Boards/x.canvas", False, False)
    assert resolve("markdown", "../pic.png") == (None, False, True)  # the path says where
    assert resolve("markdown", "%2E%2E/Boards/x.canvas") == ("Boards/x.canvas", False, False)


def test_several_files_answer_a_link_as_obsidian_breaks_the_tie() -> None:
    """Obsidian 1.13.7's `getFirstLinkpathDest` (markdown-vault-mcp PR #1380): an exact
    vault path; else a match in the linking note's own folder (an ancestor's counts for
    nothing); else the shortest path in characters, then the path itself."""

    def resolve(
        paths: list[str], written: str, source: str
    ) -> tuple[str | None, bool, tuple[str, ...]]:
        (link,) = links_of(f"[[{written}]]", source)
        found = DocumentIndexOfPaths([*paths, source]).resolve(link, source)
        return found.path, found.ambiguous, found.candidates

    beside = ["Note.md", "b/Note.md"]
    # 1. the exact vault path, even over the match beside the linking note
    assert resolve(beside, "Note", "b/src.md") == ("Note.md", False, ())
    assert resolve(beside, "b/Note", "zzzz/src.md") == ("b/Note.md", False, ())
    # 2. a match in the linking note's own folder; an ancestor's is no help
    two = ["b/Note.md", "zzzz/Note.md"]
    assert resolve(two, "Note", "zzzz/src.md") == (
        "zzzz/Note.md",
        True,
        ("zzzz/Note.md", "b/Note.md"),
    )
    assert resolve(two, "Note", "zzzz/deep/src.md")[:2] == ("b/Note.md", True)
    # 3. the shortest path string (11 characters over 12, not the fewest folders)...
    deeper = ["a/b/Note.md", "zzzz/Note.md"]
    assert resolve(deeper, "Note", "src.md") == (
        "a/b/Note.md",
        True,
        ("a/b/Note.md", "zzzz/Note.md"),
    )
    # ...then the path itself
    assert resolve(["x/Note.md", "c/Note.md"], "Note", "zzzz/src.md")[0] == "c/Note.md"
    index = DocumentIndexOfPaths(two)
    assert index.resolve_key("wiki", "note", "zzzz/src.md").path == "zzzz/Note.md"
    assert index.resolve_written("wiki", "note", "Note", "zzzz/src.md").path == "zzzz/Note.md"


def test_an_image_in_the_notes_own_folder_and_in_another_languages() -> None:
    """Two languages, each with `Attachments/x.png`: a note in `en/Attachments/` embeds its
    own folder's; one in `en/` gets no help from its folder (the image is in a subfolder of
    it): the two paths are as long, and Obsidian takes the first by path, the German one."""
    index = DocumentIndexOfPaths(
        ["en/Guide.md", "en/Attachments/Captions.md", "de/Guide.md"],
        ["en/Attachments/x.png", "de/Attachments/x.png"],
    )

    def resolve(source: str, written: str = "![[x.png]]") -> str | None:
        (link,) = links_of(written, source)
        found = index.resolve(link, source)
        assert found.ambiguous
        return found.path

    assert resolve("en/Attachments/Captions.md") == "en/Attachments/x.png"
    assert resolve("en/Attachments/Captions.md", "![x](Attachments/x.png)") == (
        "en/Attachments/x.png"
    )  # a Markdown link found by its name: the same rules
    assert resolve("en/Guide.md") == "de/Attachments/x.png"
    assert resolve("de/Guide.md") == "de/Attachments/x.png"


def test_a_tables_escaped_bar_is_not_part_of_the_target() -> None:
    (link,) = links_of("| [[Basic syntax#Lists\\|lists]] | x |", "here.md")
    assert (link.target, link.key) == ("Basic syntax#Lists", "basic syntax")


async def test_links_both_ways_renames_and_the_rebuild(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    write(docs / "hub.md", "# Hub\n\nSee [[Plan]], [[Missing]] and [budget](projects/budget.md).")
    write(docs / "projects/plan.md", "# Plan\n\nBack to [[hub]].\n\nAnd [[projects/Budget]].")
    write(docs / "projects/budget.md", "---\ntags: [money]\n---\n# Budget\n#money #q3")
    await coffer.reindexer.reconcile(kb)
    hub = (await coffer.documents.find("notes", "hub.md")).id
    links = await coffer.graph.links("notes", hub)
    assert [(o["target"], o["relative_path"], o["line"]) for o in links["outgoing"]] == [
        ("Plan", "projects/plan.md", 3),
        ("Missing", None, 3),
        ("projects/budget.md", "projects/budget.md", 3),
    ]
    budget = await coffer.graph.links("notes", "projects/budget.md")
    assert {b["relative_path"] for b in budget["backlinks"]} == {"hub.md", "projects/plan.md"}
    broken = (await coffer.graph.broken("notes"))["links"]
    assert [(b["relative_path"], b["target"]) for b in broken] == [("hub.md", "Missing")]
    assert (await coffer.graph.tags("notes"))["tags"] == [
        {"tag": "money", "count": 1},
        {"tag": "q3", "count": 1},
    ]

    # a rename: the wiki link still finds it by name, the Markdown link breaks (as a path)
    (docs / "archive").mkdir()
    (docs / "projects/budget.md").rename(docs / "archive/budget.md")
    await coffer.reindexer.reconcile(kb)
    moved = await coffer.graph.links("notes", "archive/budget.md")
    assert [b["relative_path"] for b in moved["backlinks"]] == []  # both named its old path
    write(docs / "projects/plan.md", "# Plan\n\nBack to [[hub]].\n\nAnd [[Budget]].")
    await coffer.reindexer.reconcile(kb)
    moved = await coffer.graph.links("notes", "archive/budget.md")
    assert [b["relative_path"] for b in moved["backlinks"]] == ["projects/plan.md"]
    assert await index_dump(coffer, "notes") == await rebuild_dump(coffer, kb)


async def test_documents_are_found_by_path_and_id_prefix(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    write(docs / "a/b.md", "# B")
    write(docs / "c.md", "# C")
    await coffer.reindexer.reconcile(kb)
    b = await coffer.documents.find("notes", "a/b.md")
    assert (await coffer.documents.find("notes", b.id)).path == "a/b.md"
    assert (await coffer.documents.find("notes", b.id[:8].upper())).id == b.id
    with pytest.raises(Exception, match="does not exist"):
        await coffer.documents.find("notes", b.id[:3])  # too short to be meant
    with pytest.raises(Exception, match="several"):
        await coffer.documents.find("notes", "p")  # every path-derived id starts with p


async def test_links_tags_and_paths_through_the_api_cofferctl_and_mcp(
    shared_daemon: Daemon,
) -> None:
    d = shared_daemon
    kb = f"links-{uuid.uuid4().hex[:6]}"
    d.client.post("/api/v1/knowledge_bases", {"name": kb})
    write(d.docs(kb) / "index.md", "# Index\n\n[[Topic]] and [[Gone]] #start")
    write(d.docs(kb) / "deep/topic.md", "# Topic\n\nUp to [the index](../index.md).")
    wait_for(lambda: d.client.get(d.client.kb(kb, "/documents"))["total"] == 2)

    by_path = d.client.get(d.client.kb(kb, "/documents/deep%2Ftopic.md"))
    assert by_path["relative_path"] == "deep/topic.md"
    links = d.client.get(d.client.kb(kb, "/documents/index.md/links"))
    assert [o["document_id"] for o in links["outgoing"]] == [by_path["id"], None]
    assert [b["relative_path"] for b in links["backlinks"]] == ["deep/topic.md"]
    assert d.client.get(d.client.kb(kb, "/tags"))["tags"] == [{"tag": "start", "count": 1}]
    with pytest.raises(ApiError) as err:
        d.client.get(d.client.kb(kb, "/documents/p/links"))
    assert err.value.code == "DOCUMENT_AMBIGUOUS" and len(err.value.details["candidates"]) == 2

    def run(*args: str) -> str:
        out = io.StringIO()
        assert cli.main(["--socket", str(d.socket), *args], stdout=out) == 0
        return out.getvalue()

    assert "deep/topic.md:3" in run("links", kb, "index.md")
    assert "index.md:3: Gone  (broken)" in run("links", kb, "--broken")
    assert "#start" in run("tags", kb)
    assert "Topic" in run("show", kb, "deep/topic.md")
    assert json.loads(run("show", kb, by_path["id"][:10], "--json"))["id"] == by_path["id"]

    async with McpClient(mcp_params(d.socket)) as client:
        got = await mcp_call(client, "get_links", kb=kb, document_id="deep/topic.md")
        assert got["backlinks"][0]["relative_path"] == "index.md"
        tags = await mcp_call(client, "list_tags", kb=kb)
        assert tags["tags"] == [{"tag": "start", "count": 1}]
        # a reference is one path segment: it cannot climb to another endpoint
        message = await error_of(client, "get_document", kb=kb, document_id="../../../x")
        assert "DOCUMENT_NOT_FOUND" in message


def test_a_heading_is_matched_as_obsidian_matches_it() -> None:
    from coffer_kernel.link_targets import missing_fragment, span_of

    note = "# FAQ\n\n## How large can a vault be?\n\nbig\n\n## `hasTag()`\n\nx\n"
    assert span_of(note, "How large can a vault be") == (2, 6)  # punctuation aside
    assert span_of(note, "hastag") == (6, 10)
    assert span_of(note, "FAQ#How large can a VAULT be?") == (2, 6)
    missing = missing_fragment(note, "How big")
    assert missing is not None and missing.message("FAQ.md") == ("FAQ.md has no heading 'How big'")
    assert missing_fragment(note, "^nope") is not None


def test_a_block_id_ends_its_block_after_a_space_or_an_embed() -> None:
    from coffer_kernel.link_targets import span_of

    note = "# N\n\ntext ^a-1\n\n![[pic.png]]^img\n\n2^10 is x^two\n"
    assert span_of(note, "^a-1") == (2, 3)
    assert span_of(note, "^img") == (4, 5)
    assert span_of(note, "^10") is None and span_of(note, "^two") is None  # exponents


def test_a_reference_definition_is_a_link() -> None:
    body = (
        "# Note\n\nSee [[templates]].\n[not]: a paragraph's line.md\n\n"
        '[templates]: templates.md "Note Templates"\n'
        "[templates#Metadata]: ../user/templates.md#Metadata\n"
        "[spaced]: <my%20plan.md#Budget> 'title'\n"
        '[//begin]: # "Autogenerated link references"\n\n'
        "```\n[fenced]: fenced.md\n```\n\n    [indented]: indented.md\n"
    )
    found = [(k.type, k.target, k.key, k.line) for k in links_of(body, "docs/here.md")]
    assert found == [
        ("wiki", "templates", "templates", 3),
        ("definition", "templates.md", "docs/templates", 6),
        ("definition", "../user/templates.md#Metadata", "user/templates", 7),
        ("definition", "my%20plan.md#Budget", "docs/my plan", 8),
    ]


def test_a_definition_over_two_lines_is_a_link() -> None:
    """CommonMark's definitions with the target on the line after the label, or the title
    on the line after the target (then a definition may follow it)."""
    body = (
        "# Note\n\n[templates]:\n  templates.md\n"
        "[meta]: ../user/templates.md#Metadata\n  'The metadata'\n"
        '[spaced]:\n<my plan.md#Budget> "Plan"\n'
        "[not]:\nnot a (target\n"
    )
    found = [(k.type, k.target, k.key, k.line) for k in links_of(body, "docs/here.md")]
    assert found == [
        ("definition", "templates.md", "docs/templates", 4),
        ("definition", "../user/templates.md#Metadata", "user/templates", 5),
        ("definition", "my plan.md#Budget", "docs/my plan", 8),
    ]


async def test_definitions_are_resolved_counted_as_backlinks_and_broken(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    write(docs / "user/templates.md", "# Templates\n\n## Metadata\n")
    write(
        docs / "user/index.md",
        "# Index\n\nSee [[templates]].\n\n"
        '[templates]: templates.md "Note Templates"\n'
        "[templates#Metadata]: templates.md#Metadata\n"
        "[gone]: gone.md\n"
        "[templates#Nope]: templates.md#Nope\n",
    )
    await coffer.reindexer.reconcile(kb)
    links = await coffer.graph.links("notes", "user/index.md")
    assert [(o["type"], o["target"], o["relative_path"], o["line"]) for o in links["outgoing"]] == [
        ("wiki", "templates", "user/templates.md", 3),
        ("definition", "templates.md", "user/templates.md", 5),
        ("definition", "templates.md#Metadata", "user/templates.md", 6),
        ("definition", "gone.md", None, 7),
        ("definition", "templates.md#Nope", "user/templates.md", 8),
    ]
    back = await coffer.graph.links("notes", "user/templates.md")
    assert [b["line"] for b in back["backlinks"]] == [3, 5, 6, 8]
    broken = (await coffer.graph.broken("notes"))["links"]
    assert [(b["target"], b["type"], b["problem"]) for b in broken] == [
        ("gone.md", "definition", "missing-file"),
        ("templates.md#Nope", "definition", "missing-heading"),
    ]


def test_a_heading_is_matched_by_its_github_anchor() -> None:
    from coffer_kernel.link_targets import github_slugs, missing_fragment, span_of

    note = (
        "# Templates\n\n## Markdown Templates\n\nx\n\n## Plan\n\n## Plan\n\n## C++ & Ünï: 見て_x!\n"
    )
    assert span_of(note, "markdown-templates") == (2, 6)  # VS Code, Foam, GitHub
    assert span_of(note, "Markdown Templates") == (2, 6)  # Obsidian
    assert span_of(note, "plan") == (6, 8) and span_of(note, "plan-1") == (8, 10)
    assert span_of(note, "c--ünï-見て_x") == (10, 12)
    assert missing_fragment(note, "plan-2") is not None
    assert github_slugs(["A b", "a-b", "A B", "a b-1"]) == ["a-b", "a-b-1", "a-b-2", "a-b-1-1"]
    rendered = "# T\n\n## The _emphasis_ and `code()`\n\n## See [the docs](d.md)\n"
    assert span_of(rendered, "the-emphasis-and-code") == (2, 4)  # as GitHub renders it
    assert span_of(rendered, "see-the-docs") == (4, 6)
    html = '# T\n\n<a name="customstruct" />\n\n```\n<a id="code">\n```\n<h3 id="Step2">x</h3>\n'
    assert span_of(html, "customstruct") == (2, 3) and span_of(html, "Step2") == (7, 8)
    assert span_of(html, "code") is None and span_of(html, "step2") is None  # as a browser


async def test_github_anchors_are_not_broken(coffer: Coffer, kb: KnowledgeBase, docs: Path) -> None:
    write(
        docs / "user/features/templates.md",
        '# Templates\n\n## Markdown Templates\n\n<a name="custom" />\n',
    )
    write(
        docs / "index.md",
        "# Index\n\n[t](user/features/templates.md#markdown-templates)\n"
        "[u](user/features/templates.md#markdown-templatez)\n"
        "[[templates#custom]] [c](user/features/templates.md#custom)\n",
    )
    await coffer.reindexer.reconcile(kb)
    broken = (await coffer.graph.broken("notes"))["links"]
    assert [(b["target"], b["suggestion"]) for b in broken] == [
        ("user/features/templates.md#markdown-templatez", "Markdown Templates")
    ]


def test_a_github_wiki_names_a_page_by_its_title_in_any_folder() -> None:
    pages = ["Home.md", "setup/aws/AWS-Lambda-source-setup.md", "Page Name.md", "a/Twin-Page.md",
             "bb/Twin-Page.md", "_Sidebar.md"]  # fmt: skip

    def resolve(written: str, paths: list[str], source: str = "Home.md") -> tuple[str | None, bool]:
        (link,) = links_of(f"[[{written}]]", source)
        index = DocumentIndexOfPaths(paths)
        found = index.resolve(as_read(link, index), source)
        return found.path, found.ambiguous

    assert resolve("AWS Lambda Source setup", pages) == (
        "setup/aws/AWS-Lambda-source-setup.md",
        False,
    )
    assert (
        resolve("aws lambda source setup#Step 1", pages)[0]
        == "setup/aws/AWS-Lambda-source-setup.md"
    )
    assert resolve("Page Name", pages) == ("Page Name.md", False)  # the file so named first
    assert resolve("Page-Name", pages) == ("Page Name.md", False)
    assert resolve("Twin Page", pages) == ("a/Twin-Page.md", True)  # as Obsidian breaks the tie
    assert resolve("Twin Page", pages, "bb/x.md") == ("bb/Twin-Page.md", True)
    assert resolve("No Such Page", pages) == (None, False)
    assert resolve("Start|aws lambda source setup#Step 1", pages)[0] == pages[1]  # text first
    assert resolve("Home|No Such Page", pages) == (None, False)
    addressed = DocumentIndexOfPaths(pages, ["images/logo.png"])  # GitHub's own addresses
    for written, led in [
        ("[x](/snowplow/snowplow/wiki/images/logo.png)", ("images/logo.png", False)),
        ("[x](../wiki/AWS-Lambda-source-setup#Step)", (pages[1], False)),
        ("[[https://example.com/logo.png]]", (None, True)),  # an image GitHub shows
    ]:
        (link,) = links_of(written, "setup/x.md")
        found = addressed.resolve(as_read(link, addressed), "setup/x.md")
        assert (found.path, found.outside) == led, written
    footer = [*pages[:-1], "_Footer.md"]
    assert resolve("AWS Lambda Source setup", footer)[0] == "setup/aws/AWS-Lambda-source-setup.md"
    # not a GitHub wiki (no page of its own at the root): read as Obsidian reads it, broken
    assert resolve("AWS Lambda Source setup", pages[:-1]) == (None, False)
    assert resolve("Home|No Such Page", pages[:-1]) == ("Home.md", False)
    assert resolve("AWS Lambda Source setup", [*pages[:-1], "x/_Sidebar.md"]) == (None, False)


async def test_a_github_wikis_title_links_are_backlinks_and_not_broken(
    coffer: Coffer, kb: KnowledgeBase, docs: Path
) -> None:
    write(docs / "_Sidebar.md", "* [[Home]]\n* [[Setup Guide]]\n")
    write(docs / "Home.md", "# Home\n\nStart with [[Setup Guide]] or [[setup guide#Step 1]].\n")
    write(docs / "guides/Setup-Guide.md", "# Setup\n\n## Step 1\n\n[[Missing Page]]\n")
    await coffer.reindexer.reconcile(kb)
    back = await coffer.graph.backlinks("notes", "guides/Setup-Guide.md")
    assert [(b["relative_path"], b["target"]) for b in back["backlinks"]] == [
        ("Home.md", "Setup Guide"),
        ("Home.md", "setup guide#Step 1"),
        ("_Sidebar.md", "Setup Guide"),
    ]
    broken = (await coffer.graph.broken("notes"))["links"]
    assert [b["target"] for b in broken] == ["Missing Page"]
    (docs / "_Sidebar.md").unlink()  # no longer a GitHub wiki: read as Obsidian reads it
    await coffer.reindexer.reconcile(kb)
    broken = (await coffer.graph.broken("notes"))["links"]
    assert sorted(b["target"] for b in broken) == [
        "Missing Page",
        "Setup Guide",
        "setup guide#Step 1",
    ]


async def test_code_holds_no_targets(coffer: Coffer, kb: KnowledgeBase, docs: Path) -> None:
    from coffer_kernel.link_targets import span_of

    anchors = (
        "# Block anchors\n\n```md\nA finding ^key-finding\n# Not a heading\n[x]: fenced.md\n```\n\n"
        "    indented ^indented\n\nThe finding itself ^real\n"
    )
    assert span_of(anchors, "^key-finding") is None and span_of(anchors, "^indented") is None
    assert span_of(anchors, "^real") == (10, 11) and span_of(anchors, "Not a heading") is None
    write(docs / "block-anchors.md", anchors)
    write(docs / "index.md", "# I\n\n[[block-anchors#^key-finding]] [[block-anchors#^real]]\n")
    await coffer.reindexer.reconcile(kb)
    broken = (await coffer.graph.broken("notes"))["links"]
    assert [(b["target"], b["problem"]) for b in broken] == [
        ("block-anchors#^key-finding", "missing-block")
    ]
    links = await coffer.graph.links("notes", "block-anchors.md")
    assert links["outgoing"] == []


async def test_a_link_out_of_the_kb_is_listed_as_outside(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = f"out-{uuid.uuid4().hex[:6]}"
    d.client.post("/api/v1/knowledge_bases", {"name": kb})
    write(
        d.docs(kb) / "docs/index.md",
        "# Index\n\n[c](../../CONTRIBUTING.md) [g](gone.md)\n\n[lic]: ../../LICENSE\n",
    )
    wait_for(lambda: d.client.get(d.client.kb(kb, "/documents"))["total"] == 1)
    links = d.client.get(d.client.kb(kb, "/documents/docs%2Findex.md/links"))["outgoing"]
    assert [(o["target"], o["relative_path"], o["kind"]) for o in links] == [
        ("../../CONTRIBUTING.md", None, "outside"),
        ("gone.md", None, None),
        ("../../LICENSE", None, "outside"),
    ]
    broken = d.client.get(d.client.kb(kb, "/links/broken"))["links"]
    assert [b["target"] for b in broken] == ["gone.md"]
    out = io.StringIO()
    assert cli.main(["--socket", str(d.socket), "links", kb, "docs/index.md"], stdout=out) == 0
    assert "../../CONTRIBUTING.md -> outside the knowledge base" in out.getvalue()


UNDO_15 = (
    "DROP INDEX idx_documents_title",
    "DROP INDEX idx_documents_own_title",
    "ALTER TABLE documents DROP COLUMN own_title",
    "ALTER TABLE documents DROP COLUMN heading_title",
)
UNDO_16 = (
    "DROP INDEX idx_links_alias_name",
    "ALTER TABLE links DROP COLUMN alias",
    "ALTER TABLE links DROP COLUMN alias_name",
)


def _rolled_back(d: Daemon, statements: tuple[str, ...], version: int) -> None:
    """The stopped daemon's index as an older schema `version` left it."""
    db = sqlite3.connect(d.home / "coffer.db")
    for statement in statements:
        db.execute(statement)
    db.execute(f"PRAGMA user_version = {version}")
    db.commit()
    db.close()


def _prepared_again(d: Daemon) -> list[str]:
    """The paths of the documents updated in the index since they were first indexed."""
    db = sqlite3.connect(d.home / "coffer.db")
    again = db.execute(
        "SELECT d.path FROM audit a JOIN documents d ON d.id = a.document_id"
        " WHERE a.event = 'kb_document_updated'"
    ).fetchall()
    db.close()
    return sorted(path for (path,) in again)


def test_an_index_made_before_wiki_aliases_were_kept_reads_a_github_wikis_again(
    tmp_path: Path,
) -> None:
    """Migration 16: a GitHub wiki's `[[text|Page]]` names Page, which only the alias
    kept with the link says; notes holding an aliased wiki link are read again, the others
    left as they are."""
    d = new_daemon(tmp_path).start()
    try:
        kb = "wiki"
        d.client.post("/api/v1/knowledge_bases", {"name": kb})
        write(d.docs(kb) / "_Footer.md", "[[Home]] | [[About|Snowplow-overview]]\n")
        write(d.docs(kb) / "Home.md", "# Home\n\n[[Snowplow overview]]\n")
        write(d.docs(kb) / "about/Snowplow-overview.md", "# Overview\n")

        def broken() -> list[str]:
            return [b["target"] for b in d.client.get(d.client.kb(kb, "/links/broken"))["links"]]

        wait_for(lambda: d.client.get(d.client.kb(kb, "/documents"))["total"] == 3)
        wait_for(lambda: d.settled(kb))
        assert broken() == []
        d.stop()
        _rolled_back(d, UNDO_16, 15)  # as an index before issue 45's aliases
        d.start()
        wait_for(lambda: d.settled(kb))
        assert broken() == []
        back = d.client.get(d.client.kb(kb, "/documents/about%2FSnowplow-overview.md/links"))
        assert [(b["relative_path"], b["target"]) for b in back["backlinks"]] == [
            ("Home.md", "Snowplow overview"),
            ("_Footer.md", "Snowplow-overview"),
        ]
        assert _prepared_again(d) == ["_Footer.md"]
    finally:
        d.stop()


def test_an_index_made_before_definitions_were_links_gains_them_at_the_next_start(
    tmp_path: Path,
) -> None:
    """Migration 14: links are read when a note is indexed, so a KB indexed before
    definitions and links out of its folder were links gains them after the upgrade, its
    notes holding neither left as they are (not prepared, nor embedded, again)."""
    d = new_daemon(tmp_path).start()
    try:
        kb = "old"
        d.client.post("/api/v1/knowledge_bases", {"name": kb})
        write(d.docs(kb) / "plan.md", "# Plan\n")
        write(d.docs(kb) / "hub.md", '# Hub\n\n[[plan]]\n\n[plan]: plan.md "The plan"\n')
        write(d.docs(kb) / "up.md", "# Up\n\n[c](../../CONTRIBUTING.md) [[plan]]\n")
        write(d.docs(kb) / "other.md", "# Other\n\n[[plan]] [p](plan.md)\n")

        def types(note: str) -> list[str]:
            found = d.client.get(d.client.kb(kb, f"/documents/{note}/links"))["outgoing"]
            return sorted(f"{o['type']}:{o['kind']}" for o in found)

        wait_for(lambda: types("hub.md") == ["definition:document", "wiki:document"])
        wait_for(lambda: d.settled(kb))
        d.stop()
        assert _prepared_again(d) == []
        # as an index before issue 45 §1 is (15 and 16 made again after 14)
        undone = (
            "DELETE FROM links WHERE type = 'definition' OR key LIKE '..%'",
            *UNDO_16,
            *UNDO_15,
        )
        _rolled_back(d, undone, 13)
        d.start()
        assert types("hub.md") == ["wiki:document"]  # as the old index held them
        wait_for(lambda: types("hub.md") == ["definition:document", "wiki:document"])
        wait_for(lambda: types("up.md") == ["markdown:outside", "wiki:document"])
        wait_for(lambda: d.settled(kb))
        assert _prepared_again(d) == ["hub.md", "up.md"]
    finally:
        d.stop()
        cleanup(d)
