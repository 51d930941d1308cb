"""Titles and breadcrumbs as Obsidian users expect (issue 34): a note's title is its
frontmatter `title`, else its first top-level heading, else its file's name; headings below
the first level are sections, never the title, and a passage's breadcrumbs follow heading
levels; finding a note by name looks at its file name, title and aliases."""

from __future__ import annotations

import io
import uuid
from pathlib import Path

import pptx
import pytest

from cofferctl.client import ApiError
from cofferd.application.reading import markdown
from cofferd.application.reading.chunker import chunk_markdown
from tests.support.cli import run
from tests.support.daemon import Daemon, wait_for
from tests.support.helpers import new_vault, write


@pytest.mark.parametrize(
    ("path", "text", "title"),
    [
        ("Headless Sync.md", "## Quick start\n\nrun it\n\n## Editor\n\nedit", "Headless Sync"),
        ("2fa.md", "Intro line\n\n### Enable 2FA\n\nsteps", "2fa"),
        ("plan.md", "## Aside\n\n# The Plan\n\nbody", "The Plan"),
        ("t.md", "---\ntitle: From Frontmatter\n---\n# Heading One\n", "From Frontmatter"),
        ("code.md", "```\n# not a heading\n```\n\n## Section", "code"),
        ("deep/Note Name.md", "text only", "Note Name"),
    ],
)
def test_a_notes_title(path: str, text: str, title: str) -> None:
    assert markdown.parse(text.encode(), path).title == title


def test_breadcrumbs_follow_heading_levels() -> None:
    body = (
        "## Open Settings\n\nopen it\n\n## Editor\n\nthe editor\n\n"
        "### Fonts\n\nfonts\n\n## Sync\n\nsync"
    )
    parsed = markdown.parse(body.encode(), "Settings.md")
    paths = [c.heading for c in chunk_markdown(parsed.body, parsed.title, 8, 0)]
    assert paths == [
        ("Settings", "Open Settings"),
        ("Settings", "Editor"),
        ("Settings", "Editor", "Fonts"),
        ("Settings", "Sync"),
    ]


def test_a_note_is_found_by_file_name_title_or_alias(shared_daemon: Daemon) -> None:
    d = shared_daemon
    kb = new_vault(
        d,
        "titles",
        {
            "Headless Sync.md": "## Quick start\n\nrun the headless client\n",
            "Cards view.md": "---\naliases: [Kanban board]\n---\n## Settings\n\ncards",
            "Plugins/Search.md": "# Search plugin\n\nfind notes\n",
        },
    )
    listed = d.client.get(d.client.kb(kb, "/documents"))["documents"]
    assert {doc["relative_path"]: doc["title"] for doc in listed} == {
        "Headless Sync.md": "Headless Sync",
        "Cards view.md": "Cards view",
        "Plugins/Search.md": "Search plugin",
    }
    for query, found in (
        ("headless", "Headless Sync.md"),
        ("kanban", "Cards view.md"),
        ("search.md", "Plugins/Search.md"),
        ("plugin", "Plugins/Search.md"),
    ):
        got = d.client.get(d.client.kb(kb, "/documents"), q=query)["documents"]
        assert [doc["relative_path"] for doc in got] == [found], query
    code, out = run(d, "docs", kb, "-q", "headless")
    assert code == 0 and "Headless Sync.md" in out


def _deck(own_title: str, first: tuple[str, str], second: str) -> bytes:
    made = pptx.Presentation()
    made.core_properties.title = own_title  # what the file's properties say (docProps)
    cover = made.slides.add_slide(made.slide_layouts[0])
    cover.shapes.title.text, cover.placeholders[1].text = first
    slide = made.slides.add_slide(made.slide_layouts[1])
    slide.shapes.title.text, slide.placeholders[1].text = second, f"about {second}"
    out = io.BytesIO()
    made.save(out)
    return out.getvalue()


def test_a_templates_leftover_title_gives_way_to_the_first_slide(
    shared_daemon: Daemon, tmp_path: Path
) -> None:
    """Two decks both titled "Lecture 11" (one copied from the other's template, its first
    slide "Lecture 13 / Introduction to Databases"): each is titled as its first slide says
    when its title property names the same lecture by another number, so `show "Lecture 11"`
    names one deck. An author's own title that says something else is kept."""
    d = shared_daemon
    kb = f"papers-{uuid.uuid4().hex[:6]}"
    d.client.post("/api/v1/knowledge_bases", {"name": kb, "config": {"index_formats": ["pptx"]}})
    decks = {
        "l11.pptx": _deck("Lecture 11", ("Lecture 11", "Transactions"), "Isolation"),
        "l13.pptx": _deck("Lecture 11", ("Lecture 13", "Introduction to Databases"), "Tables"),
        "course.pptx": _deck("Databases course", ("Welcome", "to the course"), "Plan"),
    }
    for name, data in decks.items():
        write(d.docs(kb) / name, data)
    listed = lambda: {  # noqa: E731
        doc["relative_path"]: doc["title"]
        for doc in d.client.get(d.client.kb(kb, "/documents"))["documents"]
    }
    wait_for(lambda: len(listed()) == 3, 60)
    assert listed() == {
        "l11.pptx": "Lecture 11",
        "l13.pptx": "Lecture 13",
        "course.pptx": "Databases course",
    }
    code, out = run(d, "show", "--header", kb, "Lecture 11")
    assert code == 0 and "l11.pptx" in out and "Transactions" in out
    code, out = run(d, "show", "--header", kb, "Lecture 13")
    assert code == 0 and "l13.pptx" in out
    added = f"{kb}-added"
    d.client.post("/api/v1/knowledge_bases", {"name": added})
    path = write(tmp_path / "deck.pptx", decks["l13.pptx"])
    assert run(d, "add", added, str(path))[0] == 0  # added as a note: the same title
    (doc,) = d.client.get(d.client.kb(added, "/documents"))["documents"]
    assert doc["title"] == "Lecture 13"


def test_a_title_two_decks_give_themselves_names_each_by_its_first_slide(
    shared_daemon: Daemon,
) -> None:
    """Two decks whose docProps both say "Lecture 11" (a template's leftover), their first
    slides saying other things: while both are in the KB each goes by its first slide, so
    either is found by it, and "Lecture 11" names both by their own titles. The older deck
    is titled again when the newcomer arrives, and back when it goes."""
    d = shared_daemon
    kb = f"papers-{uuid.uuid4().hex[:6]}"
    d.client.post("/api/v1/knowledge_bases", {"name": kb, "config": {"index_formats": ["pptx"]}})
    listed = lambda: {  # noqa: E731
        doc["relative_path"]: doc["title"]
        for doc in d.client.get(d.client.kb(kb, "/documents"))["documents"]
    }
    write(d.docs(kb) / "tx.pptx", _deck("Lecture 11", ("Transactions", "and locks"), "Isolation"))
    wait_for(lambda: listed() == {"tx.pptx": "Lecture 11"}, 60)
    intro = _deck("Lecture 11", ("Introduction to Databases", "week 1"), "Tables")
    write(d.docs(kb) / "intro.pptx", intro)
    both = {"tx.pptx": "Transactions", "intro.pptx": "Introduction to Databases"}
    wait_for(lambda: listed() == both, 60)
    for title, path in [("Transactions", "tx.pptx"), ("introduction to databases", "intro.pptx")]:
        code, out = run(d, "show", "--header", kb, title)
        assert code == 0 and path in out, (title, out)
    with pytest.raises(ApiError) as ambiguous:
        d.client.get(d.client.kb(kb, "/documents/Lecture%2011"))
    assert ambiguous.value.code == "DOCUMENT_AMBIGUOUS"
    assert "intro.pptx (Introduction to Databases), tx.pptx (Transactions)" in str(ambiguous.value)
    (d.docs(kb) / "intro.pptx").unlink()
    wait_for(lambda: listed() == {"tx.pptx": "Lecture 11"}, 60)
    code, out = run(d, "show", "--header", kb, "Lecture 11")
    assert code == 0 and "tx.pptx" in out
