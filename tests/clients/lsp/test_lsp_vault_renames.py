"""Renames never break a link (issue 45 §2): a vault holding every kind of link (wiki,
embed, Markdown, definitions; heading, nested heading, block and GitHub-anchor fragments;
percent-encoded names) has notes renamed to names no wiki link can hold (`a#b`, `x|y`,
`q]]z`, `caret^`), to spaces, unicode and a literal `%20`, an image and folders renamed,
each through a real `cofferctl lsp` (workspace/willRenameFiles) against a real daemon;
every edit it answers is applied and the file renamed on disk, and then every link of
the vault, as the daemon's API resolves it, leads to the same file and the same heading
or block as before."""

from __future__ import annotations

import os
from typing import Any

from coffer_kernel.link_targets import fragment_of, has_fragments, span_of
from cofferctl import api
from cofferctl.lsp.text import path_of
from tests.support.daemon import Daemon, wait_for
from tests.support.helpers import applied, new_vault, write
from tests.support.lsp_pipe import RawClient

PLAN = "# Plan\n\n## Budget Two\n\n### Sub Part\n\nnumbers ^blk1\n\n## Markdown Templates\n"
LOG = (
    "[[plan]] [[plan|money]] [[plan#Budget Two]] [[plan#Budget Two#Sub Part]] [[plan#^blk1]]\n"
    "![[plan]] ![[pic.png]] ![[pic.png|300]] [[notes/plan#budget two]]\n"
    "[p](notes/plan.md) [q](<notes/plan.md#Budget Two>) [r](notes/plan.md#markdown-templates)\n"
    "[s](notes/plan.md#Budget%20Two#Sub%20Part) [b](./notes/plan.md#^blk1) ![i](img/pic.png)\n"
    "[t](doc%20file.md) [[doc file]] [[leaf]] [[a/deep/leaf#Inner]] [l](a/deep/leaf.md#inner)\n"
    "\n"
    '[plan]: notes/plan.md "The plan"\n'
    "[plan#Budget]: notes/plan.md#budget-two\n"
    "[leaf]: <a/deep/leaf.md#Inner>\n"
)
LEAF = (
    "# Leaf\n\n## Inner\n\n[up](../../notes/other.md) [[other]] [[plan#Budget Two]]\n"
    "[pl](../../notes/plan.md#sub-part) [me](leaf.md#inner) [[#Inner]]\n"
)
NOTES = {
    "log.md": LOG,
    "doc file.md": "# Doc\n\n[[plan]] [o](notes/other.md)\n",
    "notes/plan.md": PLAN + "\n[[leaf]] [o](other.md) [d](../doc%20file.md)\n",
    "notes/other.md": "# Other\n\n[[plan#Markdown Templates]] [x](plan.md#^blk1)\n",
    "a/deep/leaf.md": LEAF,
}
RENAMES = [  # (old, new): notes, an image, folders
    ("notes/plan.md", "notes/a#b.md"),
    ("notes/a#b.md", "notes/x|y.md"),
    ("notes/x|y.md", "notes/q]]z.md"),
    ("notes/q]]z.md", "notes/caret^.md"),
    ("notes/caret^.md", "notes/with spaces.md"),
    ("notes/with spaces.md", "notes/ünïcode 日本.md"),
    ("notes/ünïcode 日本.md", "notes/lit%20eral.md"),
    ("doc file.md", "doc#file.md"),
    ("img/pic.png", "img/p|c.png"),
    ("a/deep", "a/deeper dir"),
    ("notes", "nö#tes"),
    ("a", "top/a"),
]

Target = tuple[str, int, str | None, str | None, tuple[int, int] | None]


def targets(d: Daemon, kb: str) -> list[Target]:
    """(note, line, type of what it leads to, where, the lines of its heading or block) of
    every link of the KB, as the daemon's API resolves it."""
    docs = d.docs(kb)
    found: list[Target] = []
    for note in api.paths(d.client, kb)["paths"]:
        for link in api.document_links(d.client, kb, note)["outgoing"]:
            path, span = link["relative_path"], None
            fragment = fragment_of(link["type"], link["target"])
            if path and fragment and has_fragments(path):
                span = span_of((docs / path).read_text(), fragment)
            found.append((note, link["line"], link["kind"], path, span))
    return sorted(found, key=repr)


def moved(before: list[Target], old: str, new: str) -> list[Target]:
    """`before` with the file or folder at `old` named `new`."""

    def place(path: str | None) -> str | None:
        if path == old:
            return new
        if path is not None and path.startswith(old + "/"):
            return new + path[len(old) :]
        return path

    return sorted(
        ((place(n) or n, line, kind, place(p), span) for n, line, kind, p, span in before),
        key=repr,
    )


def rename(d: Daemon, kb: str, client: RawClient, old: str, new: str) -> dict[str, Any]:
    """Rename `old` to `new` as an editor does: ask the server, apply its edits, rename."""
    docs = d.docs(kb)
    files = [{"oldUri": (docs / old).as_uri(), "newUri": (docs / new).as_uri()}]
    answer = client.ask("workspace/willRenameFiles", {"files": files})
    assert "error" not in answer, answer
    changes: dict[str, list[dict[str, Any]]] = (answer["result"] or {}).get("changes", {})
    for uri, edits in changes.items():
        path = path_of(uri)
        assert path is not None, uri
        write(path, applied(path.read_text(), edits))
    (docs / new).parent.mkdir(parents=True, exist_ok=True)
    os.rename(docs / old, docs / new)
    return changes


def test_every_link_of_a_vault_leads_where_it_led_through_hostile_renames(
    shared_daemon: Daemon, lsp_client: RawClient
) -> None:
    d = shared_daemon
    kb = new_vault(d, "vr", NOTES)
    write(d.docs(kb) / "img" / "pic.png", b"\x89PNG\r\n\x1a\n" + b"\0" * 32)
    wait_for(lambda: "img/pic.png" in api.paths(d.client, kb)["files"])
    wait_for(lambda: not api.broken_links(d.client, kb)["links"])  # every link lands
    expected = targets(d, kb)
    assert len(expected) == 35, expected
    for old, new in RENAMES:
        rename(d, kb, lsp_client, old, new)
        expected = moved(expected, old, new)
        try:
            wait_for(lambda wanted=expected: targets(d, kb) == wanted, timeout=20)
        except AssertionError:
            assert targets(d, kb) == expected, (old, new)
    texts = {p.relative_to(d.docs(kb)).as_posix(): p.read_text() for p in d.docs(kb).rglob("*.md")}
    assert "[[" in texts["log.md"]  # the links that could stay wiki links did
