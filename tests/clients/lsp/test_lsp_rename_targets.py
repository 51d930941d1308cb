"""Renames never change what a link leads to (issue 34 §4): `workspace/willRenameFiles`
writes, for every link whose target would change, the shortest form that leads where it
led (a path where a name would be ambiguous): links to the renamed note, the renamed
note's own links (a Markdown link's path is from its folder), and links a new name would
take over. Every edit is applied and every link of the vault resolved again, by the
daemon's own rules (`cofferd.domain.links`), before and after. Heading renames rewrite the
note's own `[[#heading]]` links too. A real `cofferctl lsp` over pipes, a real daemon."""

from __future__ import annotations

from typing import Any

import pytest

from coffer_kernel.link_targets import DocumentIndexOfPaths
from cofferd.domain.links import links_of
from tests.support.daemon import Daemon
from tests.support.helpers import applied, new_vault
from tests.support.lsp_pipe import RawClient, open_note, relpath_of

VAULT = {
    "User interface/Settings.md": "# Settings\n\n## Search\n",
    "Plugins/Search.md": (
        "# Search\n\n## Operators\n\n[o](Other.md) [[Settings]] [[Search#Operators]]\n"
        "[u](../User%20interface/Settings.md) [[#Operators]] [x](#operators)\n"
    ),
    "Plugins/Other.md": "# Other\n\nsee [[Search]] and [[Search#Operators|ops]] [s](Search.md)\n",
    "Archive/Other.md": "# Old other\n",
    "index.md": (
        "# Index\n\n[[Settings]] [[Search]] [[Plugins/Search]] [[Plugins/Other]]\n"
        "[s](Plugins/Search.md#Operators) ![[Search.md]] [[User interface/Settings#Search]]\n"
        '\n[Search]: Plugins/Search.md "The search"\n'
        "[Search#Operators]: Plugins/Search.md#Operators\n"
        "[ui]: <User interface/Settings.md#Search> 'UI'\n"
    ),
}
RENAMES = [
    ("Plugins/Search.md", "Plugins/Core/Settings.md"),  # onto a name that exists
    ("Plugins/Search.md", "Settings.md"),  # at the root: takes `[[Settings]]` over
    ("Plugins/Search.md", "Archive/Deep/Search.md"),  # into another folder
    ("Plugins/Other.md", "Other.md"),  # takes `[[Other]]`-by-path over
    ("User interface/Settings.md", "UI/Search.md"),  # shorter: takes `[[Search]]` over
    ("index.md", "Plugins/index.md"),  # only its own links move
    ("Plugins/Search.md", "Plugins/Settings.md"),  # beside Other: its folder's `[[Settings]]`
]


def targets(files: dict[str, str]) -> dict[str, list[str | None]]:
    """Where each link of each note leads, as the daemon resolves them."""
    index = DocumentIndexOfPaths(files)
    return {
        path: [index.resolve(link, path).path for link in links_of(body, path)]
        for path, body in files.items()
    }


@pytest.mark.parametrize(("old", "new"), RENAMES)
def test_a_rename_keeps_every_link_of_the_vault_on_its_target(
    shared_daemon: Daemon, lsp_client: RawClient, old: str, new: str
) -> None:
    d = shared_daemon
    kb = new_vault(d, "rt", VAULT)
    docs = d.docs(kb)
    files = [{"oldUri": (docs / old).as_uri(), "newUri": (docs / new).as_uri()}]
    answer = lsp_client.ask("workspace/willRenameFiles", {"files": files})
    assert "error" not in answer, answer
    changes: dict[str, list[dict[str, Any]]] = (answer["result"] or {}).get("changes", {})
    after = dict(VAULT)
    for uri, edits in changes.items():
        path = relpath_of(uri, docs)
        after[path] = applied(after[path], edits)
    after[new] = after.pop(old)
    before = targets(VAULT)
    now = targets(after)
    for path, led in before.items():
        moved = new if path == old else path
        expected = [new if t == old else t for t in led]
        assert now[moved] == expected, (path, after[moved])


def test_the_shortest_form_is_written(shared_daemon: Daemon, lsp_client: RawClient) -> None:
    d = shared_daemon
    kb = new_vault(d, "rt", VAULT)
    docs = d.docs(kb)
    old, new = "Plugins/Search.md", "Plugins/Core/Settings.md"
    files = [{"oldUri": (docs / old).as_uri(), "newUri": (docs / new).as_uri()}]
    changes = lsp_client.ask("workspace/willRenameFiles", {"files": files})["result"]["changes"]
    other = applied(VAULT["Plugins/Other.md"], changes[(docs / "Plugins/Other.md").as_uri()])
    assert other == (
        "# Other\n\nsee [[Core/Settings]] and [[Core/Settings#Operators|ops]] "
        "[s](Core/Settings.md)\n"
    )
    own = applied(VAULT[old], changes[(docs / old).as_uri()])
    assert own.split("\n")[4:6] == [
        # in its new folder, `[[Settings]]` is itself (Obsidian's own-folder rule)
        "[o](../Other.md) [[User interface/Settings]] [[Settings#Operators]]",
        "[u](<../../User interface/Settings.md>) [[#Operators]] [x](#operators)",
    ]


def test_a_name_in_the_linking_notes_folder_is_written_alone(
    shared_daemon: Daemon, lsp_client: RawClient
) -> None:
    """Two notes will be named Settings: from a note in the folder of one, Obsidian takes
    that one (its own folder first), so the bare name leads there; the renamed note's own
    `[[Settings]]` would then lead to itself, and names the other by its path."""
    d = shared_daemon
    kb = new_vault(d, "rt", VAULT)
    docs = d.docs(kb)
    old, new = "Plugins/Search.md", "Plugins/Settings.md"
    files = [{"oldUri": (docs / old).as_uri(), "newUri": (docs / new).as_uri()}]
    changes = lsp_client.ask("workspace/willRenameFiles", {"files": files})["result"]["changes"]
    other = applied(VAULT["Plugins/Other.md"], changes[(docs / "Plugins/Other.md").as_uri()])
    assert other == (
        "# Other\n\nsee [[Settings]] and [[Settings#Operators|ops]] [s](Settings.md)\n"
    )
    own = applied(VAULT[old], changes[(docs / old).as_uri()])
    assert own.split("\n")[4] == (
        "[o](Other.md) [[User interface/Settings]] [[Settings#Operators]]"
    )
    index = applied(VAULT["index.md"], changes[(docs / "index.md").as_uri()])
    assert index.split("\n")[2].startswith("[[User interface/Settings]] [[Plugins/Settings]]")


GITHUB_WIKI = {
    "_Sidebar.md": "* [[Home]]\n* [[Setup Guide]]\n* [[Start here|Setup-Guide#Step 1]]\n",
    "Home.md": (
        "# Home\n\n[[Setup Guide]], [[the first step|setup guide#Step 1]], [[Setup-Guide]]\n"
    ),
    "guides/Setup-Guide.md": "# Setup\n\n## Step 1\n",
}


def test_a_github_wiki_page_renamed_is_named_by_its_new_title(
    shared_daemon: Daemon, lsp_client: RawClient
) -> None:
    d = shared_daemon
    kb = new_vault(d, "gw", GITHUB_WIKI)
    docs = d.docs(kb)
    old, new = "guides/Setup-Guide.md", "guides/Getting-Started.md"
    files = [{"oldUri": (docs / old).as_uri(), "newUri": (docs / new).as_uri()}]
    changes = lsp_client.ask("workspace/willRenameFiles", {"files": files})["result"]["changes"]
    home = applied(GITHUB_WIKI["Home.md"], changes[(docs / "Home.md").as_uri()])
    assert home == (
        "# Home\n\n[[Getting Started]], [[the first step|Getting Started#Step 1]], "
        "[[Getting-Started]]\n"
    )
    sidebar = applied(GITHUB_WIKI["_Sidebar.md"], changes[(docs / "_Sidebar.md").as_uri()])
    assert sidebar == (  # GitHub's `[[text|Page]]`: the page after the bar
        "* [[Home]]\n* [[Getting Started]]\n* [[Start here|Getting-Started#Step 1]]\n"
    )


def test_a_heading_rename_rewrites_the_notes_own_heading_links(
    shared_daemon: Daemon, lsp_client: RawClient
) -> None:
    d = shared_daemon
    kb = new_vault(d, "rt", VAULT)
    docs = d.docs(kb)
    uri = (docs / "Plugins/Search.md").as_uri()
    open_note(lsp_client, uri, VAULT["Plugins/Search.md"])
    params = {"textDocument": {"uri": uri}, "position": {"line": 2, "character": 4}}
    answer = lsp_client.ask("textDocument/rename", {**params, "newName": "Query operators"})
    changes = answer["result"]["changes"]
    own = applied(VAULT["Plugins/Search.md"], changes[uri])
    assert own.split("\n")[2:6] == [
        "## Query operators",
        "",
        "[o](Other.md) [[Settings]] [[Search#Query operators]]",
        "[u](../User%20interface/Settings.md) [[#Query operators]] [x](#Query%20operators)",
    ]
    index = applied(VAULT["index.md"], changes[(docs / "index.md").as_uri()])
    assert "[s](Plugins/Search.md#Query%20operators)" in index
    # a definition: its target renamed, its label and title kept
    assert "[Search#Operators]: Plugins/Search.md#Query%20operators\n" in index


def test_a_note_rename_rewrites_definitions_keeping_label_and_title(
    shared_daemon: Daemon, lsp_client: RawClient
) -> None:
    d = shared_daemon
    kb = new_vault(d, "rt", VAULT)
    docs = d.docs(kb)
    files = [
        {"oldUri": (docs / old).as_uri(), "newUri": (docs / new).as_uri()}
        for old, new in [
            ("Plugins/Search.md", "Core/Find.md"),
            ("User interface/Settings.md", "UI.md"),
        ]
    ]
    changes = lsp_client.ask("workspace/willRenameFiles", {"files": files})["result"]["changes"]
    index = applied(VAULT["index.md"], changes[(docs / "index.md").as_uri()])
    assert index.split("\n")[-4:] == [
        '[Search]: Core/Find.md "The search"',
        "[Search#Operators]: Core/Find.md#Operators",
        "[ui]: <UI.md#Search> 'UI'",
        "",
    ]


def test_a_heading_rename_rewrites_links_naming_it_as_obsidian_matches_them(
    shared_daemon: Daemon, lsp_client: RawClient
) -> None:
    d = shared_daemon
    faq = "# FAQ\n\n## How large can a vault be?\n\nbig\n"
    linking = "# Q\n\n[[FAQ#How large can a vault be]] [[FAQ#how LARGE can a vault be?|size]]\n"
    kb = new_vault(d, "rt", {"FAQ.md": faq, "Q.md": linking})
    docs = d.docs(kb)
    uri = (docs / "FAQ.md").as_uri()
    open_note(lsp_client, uri, faq)
    params = {"textDocument": {"uri": uri}, "position": {"line": 2, "character": 4}}
    answer = lsp_client.ask("textDocument/rename", {**params, "newName": "Vault size"})
    changes = answer["result"]["changes"]
    assert applied(linking, changes[(docs / "Q.md").as_uri()]).split("\n")[2] == (
        "[[FAQ#Vault size]] [[FAQ#Vault size|size]]"
    )


def test_a_heading_rename_keeps_each_links_style(
    shared_daemon: Daemon, lsp_client: RawClient
) -> None:
    d = shared_daemon
    templates = "# Templates\n\n## Plan\n\n## Markdown Templates\n\n### filepath attribute\n"
    linking = (
        "# Q\n\n[a](templates.md#markdown-templates) [b](templates.md#Markdown%20Templates)\n"
        "[[templates#Markdown Templates#filepath attribute]] [[templates#Plan]]\n\n"
        "[templates#Markdown Templates]: templates.md#markdown-templates 'T'\n"
    )
    kb = new_vault(d, "rt", {"templates.md": templates, "Q.md": linking})
    docs = d.docs(kb)
    uri = (docs / "templates.md").as_uri()
    open_note(lsp_client, uri, templates)
    params = {"textDocument": {"uri": uri}, "position": {"line": 4, "character": 4}}
    answer = lsp_client.ask("textDocument/rename", {**params, "newName": "Note Templates (MD)"})
    changes = answer["result"]["changes"]
    assert applied(linking, changes[(docs / "Q.md").as_uri()]).split("\n")[2:6] == [
        "[a](templates.md#note-templates-md) [b](templates.md#Note%20Templates%20%28MD%29)",
        "[[templates#Note Templates (MD)#filepath attribute]] [[templates#Plan]]",
        "",
        "[templates#Markdown Templates]: templates.md#note-templates-md 'T'",
    ]


def test_a_heading_rename_moves_the_anchor_of_its_namesake(
    shared_daemon: Daemon, lsp_client: RawClient
) -> None:
    """Renaming the first of two headings of one name: links to it are renamed, the second's
    GitHub anchor loses its `-1` and links to it follow, in the note (its definitions too,
    one over two lines) and in others."""
    d = shared_daemon
    guide = (
        "# Guide\n\n## Setup\n\none\n\n## Setup\n\ntwo\n\n"
        "[first](#setup) [second](#setup-1)\n\n[s2]: #setup-1\n[s1]:\n  #setup 'first'\n"
    )
    linking = "# Q\n\n[g](guide.md#setup-1) [h](guide.md#setup) [[guide#Setup]]\n"
    kb = new_vault(d, "rt", {"guide.md": guide, "Q.md": linking})
    docs = d.docs(kb)
    uri = (docs / "guide.md").as_uri()
    open_note(lsp_client, uri, guide)
    params = {"textDocument": {"uri": uri}, "position": {"line": 2, "character": 4}}
    changes = lsp_client.ask("textDocument/rename", {**params, "newName": "Install"})["result"][
        "changes"
    ]
    assert applied(guide, changes[uri]).split("\n")[2:] == [
        "## Install", "", "one", "", "## Setup", "", "two", "",
        "[first](#Install) [second](#setup)", "", "[s2]: #setup", "[s1]:", "  #Install 'first'", "",
    ]  # fmt: skip
    assert applied(linking, changes[(docs / "Q.md").as_uri()]).split("\n")[2] == (
        "[g](guide.md#setup) [h](guide.md#Install) [[guide#Install]]"
    )


@pytest.mark.parametrize(
    ("style", "written"),
    [
        ("[p](<my plan.md>)", "[Plan #2 > Two words](<Plan %232.md#Two words>)"),
        ("[p](my%20plan.md)", "[Plan #2 > Two words](Plan%20%232.md#Two%20words)"),
    ],
)
def test_a_wiki_link_made_markdown_follows_the_notes_style(
    shared_daemon: Daemon, lsp_client: RawClient, style: str, written: str
) -> None:
    d = shared_daemon
    linking = f"# Q\n\n{style} [[Plan#Two words]]\n"
    notes = {"Plan.md": "# Plan\n\n## Two words\n", "my plan.md": "# M\n", "Q.md": linking}
    kb = new_vault(d, "rt", notes)
    docs = d.docs(kb)
    files = [{"oldUri": (docs / "Plan.md").as_uri(), "newUri": (docs / "Plan #2.md").as_uri()}]
    changes = lsp_client.ask("workspace/willRenameFiles", {"files": files})["result"]["changes"]
    assert applied(linking, changes[(docs / "Q.md").as_uri()]).split("\n")[2] == (
        f"{style} {written}"
    )


def test_a_definition_over_two_lines_is_renamed_with_its_note(
    shared_daemon: Daemon, lsp_client: RawClient
) -> None:
    d = shared_daemon
    linking = "# Q\n\n[plan]:\n  plan.md#Budget\n  'The plan'\n"
    kb = new_vault(d, "rt", {"plan.md": "# Plan\n\n## Budget\n", "Q.md": linking})
    docs = d.docs(kb)
    files = [{"oldUri": (docs / "plan.md").as_uri(), "newUri": (docs / "Old/money.md").as_uri()}]
    changes = lsp_client.ask("workspace/willRenameFiles", {"files": files})["result"]["changes"]
    assert applied(linking, changes[(docs / "Q.md").as_uri()]).split("\n")[2:5] == [
        "[plan]:", "  Old/money.md#Budget", "  'The plan'",
    ]  # fmt: skip


def test_a_path_out_of_the_kb_leads_out_to_the_same_place_from_the_new_folder(
    shared_daemon: Daemon, lsp_client: RawClient
) -> None:
    d = shared_daemon
    linking = "# I\n\n[c](../../../CONTRIBUTING.md) [[Plan]]\n\n[lic]: <../../../my LICENSE>\n"
    kb = new_vault(d, "rt", {"guide/deep/index.md": linking, "Plan.md": "# Plan\n"})
    docs = d.docs(kb)
    old, new = docs / "guide/deep/index.md", docs / "index.md"
    files = [{"oldUri": old.as_uri(), "newUri": new.as_uri()}]
    changes = lsp_client.ask("workspace/willRenameFiles", {"files": files})["result"]["changes"]
    assert applied(linking, changes[old.as_uri()]) == (
        "# I\n\n[c](../CONTRIBUTING.md) [[Plan]]\n\n[lic]: <../my LICENSE>\n"
    )
    files = [{"oldUri": old.as_uri(), "newUri": (docs / "guide/deep/moved.md").as_uri()}]
    answer = lsp_client.ask("workspace/willRenameFiles", {"files": files})["result"]
    assert answer is None or old.as_uri() not in answer["changes"]  # the same folder: as it is
