"""Titles and breadcrumbs as Obsidian users expect (issue 34): a note's title is its
frontmatter `title`, else its first top-level heading, else its file's name; headings below
the first level are sections, never the title, and a passage's breadcrumbs follow heading
levels; finding a note by name looks at its file name, title and aliases."""

from __future__ import annotations

import pytest

from cofferd.application.reading import markdown
from cofferd.application.reading.chunker import chunk_markdown
from tests.support.cli import run
from tests.support.daemon import Daemon
from tests.support.helpers import new_vault


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
